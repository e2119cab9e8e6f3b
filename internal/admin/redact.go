package admin

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
)

// Redacted replaces every secret payload in a dump.
const Redacted = "[redacted]"

// Redact returns m with private material replaced: a Secret's private key,
// key password, session ticket keys and generic secret. Certificates and
// CAs are public and stay. m itself is never changed.
func Redact(m proto.Message) proto.Message {
	s, ok := m.(*tlsv3.Secret)
	if !ok {
		return m
	}
	c := proto.Clone(s).(*tlsv3.Secret)
	red := func() *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: Redacted}}
	}
	if tc := c.GetTlsCertificate(); tc != nil {
		if tc.PrivateKey != nil {
			tc.PrivateKey = red()
		}
		if tc.Password != nil {
			tc.Password = red()
		}
	}
	if k := c.GetSessionTicketKeys(); k != nil {
		for i := range k.Keys {
			k.Keys[i] = red()
		}
	}
	if g := c.GetGenericSecret(); g != nil {
		g.Secret = red()
	}
	return c
}
