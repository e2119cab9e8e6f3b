package cli

import (
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pylon-xds/pylon/internal/ca"
)

func newCerts() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "A small CA for getting started with mTLS: make a CA, issue node and server certificates",
		Long: `A small certificate authority for getting started with mutual TLS.

init makes a CA (ECDSA P-256) in a folder: ca.pem and ca-key.pem. issue makes
a client certificate for a node, bound to its id and cluster by the same rule
pylon serve --node-identity checks, or with --server a certificate for Pylon's
own xDS and admin ports. Files are named NAME.pem and NAME-key.pem (NAME: the
node id, "server", or --name); keys are written with mode 0600 and never
printed; no file is replaced without --force.

For production, use your own PKI (SPIRE, cert-manager, a corporate CA): this
CA's key is a file, and it revokes nothing.`,
		Example: `  pylon certs init --dir pki --trust-domain example.org
  pylon certs issue --server --dir pki --dns localhost --ip 127.0.0.1
  pylon certs issue --dir pki --node-id edge-1 --cluster edge`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newCertsInit(), newCertsIssue())
	return cmd
}

func newCertsInit() *cobra.Command {
	var o ca.InitOptions
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Make a CA in a folder: ca.pem and ca-key.pem (mode 0600)",
		Long: `Make a CA in a folder (created with mode 0700 if missing): its certificate
ca.pem, which Pylon (--xds-client-ca) and every client trust, and its key
ca-key.pem (mode 0600). With --trust-domain, the CA carries the SPIFFE ID
spiffe://TRUST_DOMAIN, and the certificates it issues default to it.

Replacing a CA (--force) makes every certificate the old one issued
unverifiable: issue them again.`,
		Example: "  pylon certs init --dir pki --trust-domain example.org",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := ca.Init(o)
			if err != nil {
				return err
			}
			report(cmd.OutOrStdout(), "CA", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", "", "the CA's folder (required)")
	f.StringVar(&o.TrustDomain, "trust-domain", "", "the SPIFFE trust domain of the certificates the CA issues, e.g. example.org")
	f.DurationVar(&o.Validity, "validity", ca.DefaultCAValidity, "how long the CA is valid")
	f.BoolVar(&o.Force, "force", false, "replace an existing CA (every certificate it issued stops verifying)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func newCertsIssue() *cobra.Command {
	var client ca.ClientOptions
	var server, peer bool
	var ips []string
	cmd := &cobra.Command{
		Use:   "issue",
		Short: "Issue a node's client certificate (bound to --node-id and --cluster), or with --server Pylon's own",
		Long: `Issue a certificate from the CA in --dir.

A client certificate (the default) proves the name --node-identity wants for
the node: with the default rule, the URI SAN
spiffe://TRUST_DOMAIN/ns/CLUSTER/sa/NODE_ID; with a DNS rule such as
'{id}.{cluster}.proxies.example.com', that DNS SAN. Pass the rule and trust
domain that pylon serve runs with; the certificate is checked by the server's
own code before it is written, and a node id or cluster the rule cannot bind
is refused with the server's error. It is for client auth only, and valid for
30 days unless --validity says otherwise.

With --server, a certificate for Pylon's xDS or admin port (--xds-tls-cert,
--admin-tls-cert) naming what clients dial, --dns and --ip; valid for 90 days
unless --validity says otherwise. No certificate outlives its CA. With --peer
as well, it is good for client auth too: for a server that dials its peers
with the certificate it serves with, such as an etcd member (its
--peer-cert-file). Its common name is the first --dns.`,
		Example: `  pylon certs issue --dir pki --node-id edge-1 --cluster edge
  pylon certs issue --dir pki --node-id edge-1 --cluster edge --node-identity '{id}.{cluster}.proxies.example.com'
  pylon certs issue --server --dir pki --dns pylon.example.com --ip 127.0.0.1
  pylon certs issue --server --peer --dir etcd-pki --name etcd --dns etcd --dns etcd-0.etcd`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if server {
				return issueServer(cmd, client, ips, peer)
			}
			for _, name := range []string{"ip", "peer"} {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("--%s is for a server certificate (--server)", name)
				}
			}
			if client.NodeID == "" {
				return fmt.Errorf("--node-id is required for a client certificate (or pass --server)")
			}
			out, err := ca.IssueClient(client)
			if err != nil {
				return err
			}
			report(cmd.OutOrStdout(), "client certificate", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&client.Dir, "dir", "", "the CA's folder (required), where the certificate is written")
	f.BoolVar(&server, "server", false, "issue a server certificate for Pylon's own ports")
	f.BoolVar(&peer, "peer", false, "with --server, make it good for client auth too (an etcd member's --peer-cert-file)")
	f.StringVar(&client.NodeID, "node-id", "", "the node id the client certificate proves")
	f.StringVar(&client.Cluster, "cluster", "", "the node cluster the client certificate proves")
	f.StringVar(&client.Rule, "node-identity", ca.DefaultRule, "the identity rule pylon serve runs with (its --node-identity)")
	f.StringVar(&client.TrustDomain, "trust-domain", "", "the SPIFFE trust domain pylon serve runs with (default: the CA's)")
	f.StringSliceVar(&client.DNS, "dns", nil, "a DNS name the certificate carries (repeatable); with --server, the names clients dial")
	f.StringSliceVar(&ips, "ip", nil, "with --server, an IP address clients dial (repeatable)")
	f.StringVar(&client.Name, "name", "", "write NAME.pem and NAME-key.pem (default: the node id, or server)")
	f.DurationVar(&client.Validity, "validity", 0, "how long the certificate is valid (default 720h for a client, 2160h for a server)")
	f.BoolVar(&client.Force, "force", false, "replace existing files of the same name")
	alias(f, "node-cluster", "cluster")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// issueServer issues a server certificate; the client-only flags are
// refused rather than ignored.
func issueServer(cmd *cobra.Command, c ca.ClientOptions, ipFlags []string, peer bool) error {
	for _, name := range []string{"node-id", "cluster", "node-identity", "trust-domain"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s is for a client certificate, not --server", name)
		}
	}
	var ips []net.IP
	for _, s := range ipFlags {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("--ip %q: not an IP address", s)
		}
		ips = append(ips, ip)
	}
	out, err := ca.IssueServer(ca.ServerOptions{Dir: c.Dir, DNS: c.DNS, IPs: ips, Peer: peer, Name: c.Name, Validity: c.Validity, Force: c.Force})
	if err != nil {
		return err
	}
	report(cmd.OutOrStdout(), "server certificate", out)
	return nil
}

// report says what was written: paths, names and expiry, never a key.
func report(w io.Writer, what string, out ca.Issued) {
	fmt.Fprintf(w, "wrote %s %s (valid until %s)\n", what, out.CertFile, out.NotAfter.UTC().Format(time.RFC3339))
	if len(out.Names) > 0 {
		fmt.Fprintf(w, "  names: %s\n", strings.Join(out.Names, ", "))
	}
	fmt.Fprintf(w, "wrote its key %s (mode 0600)\n", out.KeyFile)
}
