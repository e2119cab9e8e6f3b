package cli

// relaySections are relay's flags by what they are about, as
// serveSections are serve's: every flag relay has is in exactly one (a
// test checks).
var relaySections = []flagSection{
	{"Upstream", []string{"upstream", "upstream-for", "upstream-admin", "upstream-read-token-file", "upstream-relay-token-file", "key", "relay-id", "upstream-ca", "upstream-cert", "upstream-key", "upstream-server-name"}},
	{"xDS", []string{"xds-addr"}},
	{"Admin API", []string{"admin-addr", "data-dir", "admin-token-file", "read-token-file", "admin-tls-cert", "admin-tls-key", "admin-client-ca", "admin-insecure"}},
	{"Security", []string{"xds-tls-cert", "xds-tls-key", "xds-client-ca", "xds-require-client-cert", "node-identity", "trust-domain", "csds-identity"}},
	{"Limits", []string{"max-keys", "idle-key", "max-key-resources", "upstream-streams-per-connection", "max-initial-sends", "new-streams-per-second", "max-resource-names", "max-streams-per-connection", "send-stall", "admin-max-conns"}},
	{"Replicas and stopping", []string{"id", "max-connection-age", "max-connection-age-grace", "drain-period", "shutdown-grace"}},
	{"Logging and help", []string{"log-level", "log-format", "help"}},
	{"Other commands'", []string{"token-file", "admin-ca-file", "admin-cert-file", "admin-key-file"}},
}
