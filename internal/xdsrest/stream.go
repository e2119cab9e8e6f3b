package xdsrest

import (
	"context"
	"io"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// pollStream is one REST poll as the protocol core sees it: a gRPC server
// stream whose client sends one request and reads what the core answers.
// The core's stream has one reader goroutine calling RecvMsg in turn and
// one loop calling SendMsg; the handler reads sent and processed.
type pollStream struct {
	ctx context.Context
	req *discoveryv3.DiscoveryRequest
	// recvs counts RecvMsg calls; only the core's reader calls it.
	recvs int
	// sent hands each response to the handler.
	sent chan *discoveryv3.DiscoveryResponse
	// processed is closed once the core has handled the request.
	processed chan struct{}
}

func newPollStream(ctx context.Context, req *discoveryv3.DiscoveryRequest) *pollStream {
	return &pollStream{ctx: ctx, req: req, sent: make(chan *discoveryv3.DiscoveryResponse), processed: make(chan struct{})}
}

// RecvMsg gives the core the poll's request, then the same request again
// as a probe, then blocks until the poll ends. The core may answer nothing
// at all (a reconnecting client spared a resend it holds, X24; nothing the
// client may have), and says nothing when it decides so. But its loop
// takes requests one at a time, and its reader hands over one request
// before it reads the next: a third RecvMsg means the loop took the probe,
// so it finished the request, and whatever it sent for it was received.
// The probe changes nothing: it carries no nonce, so after a response it
// is stale (X14) and ignored; before one it repeats the subscription.
func (p *pollStream) RecvMsg(m any) error {
	p.recvs++
	switch p.recvs {
	case 1, 2:
		dst, ok := m.(*discoveryv3.DiscoveryRequest)
		if !ok {
			return io.EOF
		}
		proto.Reset(dst)
		proto.Merge(dst, p.req)
		return nil
	case 3:
		close(p.processed)
	}
	<-p.ctx.Done()
	return io.EOF
}

// SendMsg hands a response to the handler. The core may send a shared,
// pre-encoded form of the response; it embeds the response message, which
// its ProtoReflect returns.
func (p *pollStream) SendMsg(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return io.ErrClosedPipe
	}
	resp, ok := pm.ProtoReflect().Interface().(*discoveryv3.DiscoveryResponse)
	if !ok {
		return io.ErrClosedPipe
	}
	select {
	case p.sent <- resp:
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

func (p *pollStream) Context() context.Context     { return p.ctx }
func (p *pollStream) SetHeader(metadata.MD) error  { return nil }
func (p *pollStream) SendHeader(metadata.MD) error { return nil }
func (p *pollStream) SetTrailer(metadata.MD)       {}
