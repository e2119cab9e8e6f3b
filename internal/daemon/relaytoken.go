package daemon

import (
	"fmt"
	"strings"

	"github.com/pylon-xds/pylon/internal/seal"
	"github.com/pylon-xds/pylon/internal/token"
)

// maxRelayToken bounds the relay token's file.
const maxRelayToken = 4 << 10

// relayToken reads --relay-token-file, the token that authorises relays'
// reports (POST /v1/relays) and nothing else, unlike either admin token: "" without the flag, when
// only the write token does. A private file (0600, no link), as the other
// token files; read at start, so a new token takes a restart.
func relayToken(path string, tokens *token.Files) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := seal.ReadPrivate(path, "--relay-token-file", maxRelayToken)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", fmt.Errorf("--relay-token-file %s: the token is %d bytes; at least 16", path, len(tok))
	}
	if cur := tokens.Current(); token.Equal(tok, cur.Read) || token.Equal(tok, cur.Write) {
		return "", fmt.Errorf("--relay-token-file %s: the token is the admin API's read or write token; give relays a token of their own", path)
	}
	return tok, nil
}
