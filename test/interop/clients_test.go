package interop

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pylon-xds/pylon/internal/daemon/daemontest"
)

// rpcTimeout is each RPC's deadline (waiting for ready: the first one
// waits for the client's xDS configuration, slower on a loaded CI machine);
// a client's answer must come within it plus answerSlack (a subprocess
// loads its gRPC library first).
const (
	rpcTimeout  = 10 * time.Second
	answerSlack = 5 * time.Second
	// clientLife bounds a subprocess client's whole run.
	clientLife = 60 * time.Second
)

// client makes one unary RPC of method with the given metadata and returns
// the backend that answered.
type client interface {
	call(method string, md map[string]string) (string, error)
}

// need says what a client needs installed, to skip without it (or fail
// under CI=true, which installs it with .ci/install-interop.sh).
func need(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	msg := what + " is not installed: run .ci/install-interop.sh"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: interop tests must run)")
	}
	t.Skip(msg)
}

// python is /usr/bin/python3, Debian's, which sees python3-grpcio (a pyenv
// or venv python3 on PATH would not); it must import grpc.
func python(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := exec.CommandContext(ctx, py, "-c", "import grpc").Run()
	need(t, "python3-grpcio (gRPC C-core for "+py+")", err == nil)
	return py
}

// node finds node and checks that npm ci installed grpc-js-xds here.
func nodeJS(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		path = "/usr/bin/node"
	}
	_, errBin := os.Stat(path)
	_, errMod := os.Stat(filepath.Join("node_modules", "@grpc", "grpc-js-xds", "package.json"))
	need(t, "node with test/interop/node_modules/@grpc/grpc-js-xds", errBin == nil && errMod == nil)
	return path
}

// subprocess is a client program (client.py, client.js) speaking one JSON
// line per RPC over its stdin and stdout.
type subprocess struct {
	stdin   io.WriteCloser
	answers chan string
	// crashes is set by a test that expects the client to die.
	crashes atomic.Bool
}

type request struct {
	Method   string            `json:"method"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Timeout  float64           `json:"timeout"`
}

type answer struct {
	OK       bool   `json:"ok"`
	Response string `json:"response"`
	Code     string `json:"code"`
	Error    string `json:"error"`
}

// startSubprocess runs argv with GRPC_XDS_BOOTSTRAP set to bootstrapPath.
// It is stopped when the test ends (end of stdin, then killed after a
// bound); its stderr goes to the test log if the test failed.
func startSubprocess(t *testing.T, bootstrapPath string, argv ...string) *subprocess {
	t.Helper()
	return startSubprocessEnv(t, bootstrapPath, nil, argv...)
}

// startSubprocessEnv is startSubprocess with extra environment variables
// (KEY=value) for the process.
func startSubprocessEnv(t *testing.T, bootstrapPath string, env []string, argv ...string) *subprocess {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientLife)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// The xDS client's and resolver's traces say why a client got no
	// configuration (its bootstrap refused, a resource NACKed); they are
	// shown only if the test fails.
	cmd.Env = append(append(clientEnv(), env...), "GRPC_XDS_BOOTSTRAP="+bootstrapPath, "GRPC_VERBOSITY=DEBUG", "GRPC_TRACE=xds_client,xds_resolver")
	cmd.WaitDelay = 5 * time.Second
	stderr := &daemontest.LogBuffer{Keep: stderrKept}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("%s: %v", argv[0], err)
	}
	p := &subprocess{stdin: stdin, answers: make(chan string, 1)}
	read := make(chan struct{})
	go func() {
		// Ends when the process closes stdout (exit or kill).
		defer close(read)
		defer close(p.answers)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.answers <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		// Drain what was not read so the reader can finish.
		for range p.answers {
		}
		<-read
		err := cmd.Wait()
		cancel()
		if err != nil && !t.Failed() && !p.crashes.Load() {
			t.Errorf("%s: %v", argv[1], err)
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", argv[1], stderr.String())
		}
	})
	return p
}

// clientEnv is the test's environment without proxy settings: gRPC honours
// http_proxy, and loopback traffic must not go anywhere else.
func clientEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasSuffix(strings.ToLower(k), "_proxy") || strings.HasPrefix(k, "GRPC_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (p *subprocess) call(method string, md map[string]string) (string, error) {
	line, err := json.Marshal(request{Method: method, Metadata: md, Timeout: rpcTimeout.Seconds()})
	if err != nil {
		return "", err
	}
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		return "", fmt.Errorf("writing to the client: %w", err)
	}
	select {
	case got, ok := <-p.answers:
		if !ok {
			return "", errors.New("the client exited")
		}
		var a answer
		if err := json.Unmarshal([]byte(got), &a); err != nil {
			return "", fmt.Errorf("client answered %q: %w", got, err)
		}
		if !a.OK {
			return "", fmt.Errorf("RPC failed: %s: %s", a.Code, a.Error)
		}
		return backendOf(a.Response)
	case <-time.After(rpcTimeout + answerSlack):
		return "", errors.New("no answer from the client")
	}
}

// backendOf decodes a backend's answer: a StringValue, in hex.
func backendOf(hexResp string) (string, error) {
	raw, err := hex.DecodeString(hexResp)
	if err != nil {
		return "", err
	}
	var v wrapperspb.StringValue
	if err := proto.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("response %q: %w", hexResp, err)
	}
	return v.GetValue(), nil
}

// goClient is grpc-go's xDS client in process, on the same bootstrap.
type goClient struct{ conn *grpc.ClientConn }

func startGoClient(t *testing.T, bootstrapJSON []byte) *goClient {
	t.Helper()
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bootstrapJSON)
	if err != nil {
		t.Fatalf("grpc-go refused the bootstrap: %v", err)
	}
	conn, err := grpc.NewClient("xds:///greeter", grpc.WithResolvers(resolver), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &goClient{conn: conn}
}

func (g *goClient) call(method string, md map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), metadata.New(md)), rpcTimeout)
	defer cancel()
	var v wrapperspb.StringValue
	if err := g.conn.Invoke(ctx, method, &emptypb.Empty{}, &v, grpc.WaitForReady(true)); err != nil {
		return "", err
	}
	return v.GetValue(), nil
}

// stderrKept is how much of a client's stderr a test keeps: the end.
const stderrKept = 64 << 10
