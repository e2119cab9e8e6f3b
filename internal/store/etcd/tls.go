package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// ClientTLS builds the TLS configuration for etcd from files, as etcdctl
// takes them (--cert, --key, --cacert): caFile verifies etcd's servers
// (empty: the system's roots), certFile and keyFile, both or neither,
// authenticate this client. The client certificate is read again at each
// handshake, so a rotated one is used without a restart. TLS 1.2 at least.
// Errors name the files, never their content.
func ClientTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("etcd TLS: a client certificate and its key go together (--etcd-cert and --etcd-key)")
	}
	info := transport.TLSInfo{CertFile: certFile, KeyFile: keyFile, TrustedCAFile: caFile}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd TLS (cert %q, key %q, CA %q): %w", certFile, keyFile, caFile, err)
	}
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	return cfg, nil
}
