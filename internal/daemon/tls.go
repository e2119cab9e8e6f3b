package daemon

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/pylon-xds/pylon/internal/certs"
	"github.com/pylon-xds/pylon/internal/fleet"
	"github.com/pylon-xds/pylon/internal/identity"
	"github.com/pylon-xds/pylon/internal/loopback"
	"github.com/pylon-xds/pylon/internal/xds"
)

// TLSFiles are a server's certificate, key and, optionally, the CAs its
// clients' certificates are verified against. They are re-read when they
// change (certs.Server).
type TLSFiles struct {
	Cert, Key string
	ClientCA  string
}

func (f TLSFiles) enabled() bool { return f.Cert != "" || f.Key != "" || f.ClientCA != "" }

// security is what the TLS flags add up to, checked before anything listens.
type security struct {
	xdsTLS   *certs.Server // nil: plaintext
	adminTLS *certs.Server
	identity *identity.Rule // nil: node ids are not bound to certificates
}

// loadSecurity reads the certificates once (a bad file is a start-up
// error, unlike a bad rotation later) and parses the identity rule.
func loadSecurity(o Options) (*security, error) {
	var s security
	var err error
	if o.XDSRequireClientCert && o.XDSTLS.ClientCA == "" {
		return nil, errors.New("--xds-require-client-cert needs --xds-client-ca to verify the certificates")
	}
	if o.XDSTLS.enabled() {
		s.xdsTLS, err = certs.New(certs.Options{
			Name: "xds", CertFile: o.XDSTLS.Cert, KeyFile: o.XDSTLS.Key, ClientCAFile: o.XDSTLS.ClientCA,
			RequireClientCert: o.XDSRequireClientCert, NextProtos: []string{"h2"},
			CheckEvery: o.TLSCheckEvery, Logger: o.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("%w (--xds-tls-cert, --xds-tls-key, --xds-client-ca)", err)
		}
	}
	if o.AdminTLS.enabled() {
		s.adminTLS, err = certs.New(certs.Options{
			Name: "admin", CertFile: o.AdminTLS.Cert, KeyFile: o.AdminTLS.Key, ClientCAFile: o.AdminTLS.ClientCA,
			// A client CA on the admin port is an access control: a
			// client without a certificate is refused at the handshake,
			// before any token is checked.
			RequireClientCert: o.AdminTLS.ClientCA != "",
			NextProtos:        []string{"http/1.1"}, CheckEvery: o.TLSCheckEvery, Logger: o.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("%w (--admin-tls-cert, --admin-tls-key, --admin-client-ca)", err)
		}
	}
	if o.NodeIdentity != "" {
		// Without verified client certificates a rule binds nothing: every
		// stream would go through unbound while the operator thinks
		// otherwise.
		if o.XDSTLS.ClientCA == "" {
			return nil, errors.New("--node-identity needs --xds-client-ca: node ids are bound to verified client certificates")
		}
		if s.identity, err = identity.ParseRule(o.NodeIdentity, o.TrustDomain); err != nil {
			return nil, fmt.Errorf("--node-identity: %w", err)
		}
	} else if o.TrustDomain != "" {
		return nil, errors.New("--trust-domain is only used by --node-identity, which is not set")
	}
	return &s, nil
}

// checkExposure warns about, or refuses, what the bound addresses expose:
// plaintext xDS beyond this host, Secrets to unverified clients, and an
// admin API reachable from the network without TLS.
func checkExposure(o Options, s *security, xdsAddr, adminAddr string, log *slog.Logger) error {
	if !loopback.Is(adminAddr) && s.adminTLS == nil {
		if !o.AdminInsecure {
			return fmt.Errorf("the admin API would listen on %s, beyond this host, without TLS: its tokens and the config would cross the network in clear. "+
				"Give --admin-tls-cert and --admin-tls-key, bind --admin-addr to 127.0.0.1, or accept the risk with --admin-insecure", adminAddr)
		}
		log.Warn("admin API in plaintext beyond this host (--admin-insecure): tokens and config cross the network in clear", "admin", adminAddr)
	}
	if !loopback.Is(xdsAddr) && s.xdsTLS == nil {
		log.Warn("xDS in plaintext beyond this host: any client that reaches this port can claim any node id and read its config, "+
			"and no client can prove who it is, so no Secret is served; use --xds-tls-cert, --xds-tls-key and --xds-client-ca", "xds", xdsAddr)
	}
	if s.xdsTLS != nil && o.XDSTLS.ClientCA == "" {
		log.Warn("xDS over TLS without --xds-client-ca: clients are not authenticated, node ids are not bound and no Secret is served", "xds", xdsAddr)
	}
	if o.XDSTLS.ClientCA != "" && o.NodeIdentity == "" {
		log.Warn("client certificates are verified but node ids are not bound to them (no --node-identity): "+
			"any certificate from the CA can claim any node id and receive the Secrets of that node's group that no secret policy restricts", "xds", xdsAddr)
	}
	if o.InsecureServeSecrets {
		log.Warn("INSECURE: --insecure-serve-secrets serves Secrets, private keys included, to clients without a verified client certificate: "+
			"anyone who reaches the xDS port can read every key of the group it claims", "xds", xdsAddr)
	}
	return nil
}

// watchCerts checks the TLS files on their own clock, so that a rotation
// takes effect without waiting for a handshake. When the xDS client CAs
// change, every open xDS connection's client certificate is verified
// again against them, and the connections that no longer verify are
// closed (xds.Server.VerifyClients).
func watchCerts(ctx context.Context, g *errgroup.Group, o Options, s *security, xdsSrv *xds.Server) {
	if s.xdsTLS != nil {
		var onClientCAs func(*x509.CertPool)
		if o.XDSTLS.ClientCA != "" {
			onClientCAs = xdsSrv.VerifyClients
		}
		g.Go(func() error { return s.xdsTLS.Run(ctx, onClientCAs) })
	}
	if s.adminTLS != nil {
		g.Go(func() error { return s.adminTLS.Run(ctx, nil) })
	}
}

// binding is which node claims the identity rule binds to certificates.
func (s *security) binding() fleet.Binding {
	id, cluster := s.identity.Binds()
	return fleet.Binding{ID: id, Cluster: cluster}
}
