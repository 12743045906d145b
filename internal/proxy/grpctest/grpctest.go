// Package grpctest is a small gRPC service for tests of the proxy: a
// unary, a server-streaming, a client-streaming and a bidirectional method
// over wrapperspb.StringValue, registered with a hand-written
// grpc.ServiceDesc (no generated code).
package grpctest

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ServiceName is the test service's full name.
const ServiceName = "strait.test.Echo"

// Special unary inputs.
const (
	// FailInput makes Echo fail with FailCode and FailMessage.
	FailInput = "fail"
	// WaitInput makes Echo wait until its context ends, then report the
	// context's error on Canceled.
	WaitInput = "wait"
)

// FailCode and FailMessage are Echo's answer to FailInput. The message has
// characters grpc-message must percent-encode.
const (
	FailCode    = codes.FailedPrecondition
	FailMessage = "precondition failed: 100% ünïcode"
)

// Server implements the service.
type Server struct {
	// Canceled receives the context error of every Echo(WaitInput) call
	// when its context ends (buffered; a full channel drops it).
	Canceled chan error
}

// NewServer returns a Server.
func NewServer() *Server { return &Server{Canceled: make(chan error, 16)} }

// Register registers s on gs.
func Register(gs *grpc.Server, s *Server) { gs.RegisterService(&serviceDesc, s) }

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return srv.(*Server).echo(ctx, in)
		},
	}},
	Streams: []grpc.StreamDesc{
		{StreamName: "Count", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error { return srv.(*Server).count(ss) }},
		{StreamName: "Join", ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error { return srv.(*Server).join(ss) }},
		{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error { return srv.(*Server).chat(ss) }},
	},
}

// echo returns its input, with header metadata "x-echo" and trailer
// metadata "x-trailer" set to it.
func (s *Server) echo(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-echo", in.GetValue()))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", in.GetValue()))
	switch in.GetValue() {
	case FailInput:
		return nil, status.Error(FailCode, FailMessage)
	case WaitInput:
		<-ctx.Done()
		select {
		case s.Canceled <- ctx.Err():
		default:
		}
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return in, nil
}

// count sends n messages "0".."n-1" for an input n.
func (s *Server) count(ss grpc.ServerStream) error {
	in := new(wrapperspb.StringValue)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	n, err := strconv.Atoi(in.GetValue())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "count %q is not a number", in.GetValue())
	}
	for i := range n {
		if err := ss.SendMsg(wrapperspb.String(strconv.Itoa(i))); err != nil {
			return err
		}
	}
	return nil
}

// join answers with its inputs joined by ",".
func (s *Server) join(ss grpc.ServerStream) error {
	var parts []string
	for {
		in := new(wrapperspb.StringValue)
		err := ss.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			return ss.SendMsg(wrapperspb.String(strings.Join(parts, ",")))
		}
		if err != nil {
			return err
		}
		parts = append(parts, in.GetValue())
	}
}

// chat answers each message with it upper-cased, as it arrives.
func (s *Server) chat(ss grpc.ServerStream) error {
	for {
		in := new(wrapperspb.StringValue)
		err := ss.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.SendMsg(wrapperspb.String(strings.ToUpper(in.GetValue()))); err != nil {
			return err
		}
	}
}

// Client calls the service on a connection.
type Client struct{ CC grpc.ClientConnInterface }

// Echo calls Echo; header and trailer receive the call's metadata.
func (c Client) Echo(ctx context.Context, in string, header, trailer *metadata.MD) (string, error) {
	out := new(wrapperspb.StringValue)
	err := c.CC.Invoke(ctx, "/"+ServiceName+"/Echo", wrapperspb.String(in), out, callOpts(header, trailer)...)
	return out.GetValue(), err
}

// Count calls Count(n) and returns the messages received.
func (c Client) Count(ctx context.Context, n int) ([]string, error) {
	st, err := c.CC.NewStream(ctx, &serviceDesc.Streams[0], "/"+ServiceName+"/Count")
	if err != nil {
		return nil, err
	}
	if err := st.SendMsg(wrapperspb.String(strconv.Itoa(n))); err != nil {
		return nil, err
	}
	if err := st.CloseSend(); err != nil {
		return nil, err
	}
	var out []string
	for {
		m := new(wrapperspb.StringValue)
		err := st.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m.GetValue())
	}
}

// Join calls Join with parts.
func (c Client) Join(ctx context.Context, parts ...string) (string, error) {
	st, err := c.CC.NewStream(ctx, &serviceDesc.Streams[1], "/"+ServiceName+"/Join")
	if err != nil {
		return "", err
	}
	for _, p := range parts {
		if err := st.SendMsg(wrapperspb.String(p)); err != nil {
			return "", err
		}
	}
	if err := st.CloseSend(); err != nil {
		return "", err
	}
	out := new(wrapperspb.StringValue)
	if err := st.RecvMsg(out); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}

// Chat sends each message and waits for its answer before the next, so it
// only ends if every message is relayed as soon as it is sent.
func (c Client) Chat(ctx context.Context, msgs ...string) ([]string, error) {
	st, err := c.CC.NewStream(ctx, &serviceDesc.Streams[2], "/"+ServiceName+"/Chat")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range msgs {
		if err := st.SendMsg(wrapperspb.String(m)); err != nil {
			return out, err
		}
		r := new(wrapperspb.StringValue)
		if err := st.RecvMsg(r); err != nil {
			return out, err
		}
		out = append(out, r.GetValue())
	}
	if err := st.CloseSend(); err != nil {
		return out, err
	}
	if err := st.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		return out, err
	}
	return out, nil
}

func callOpts(header, trailer *metadata.MD) []grpc.CallOption {
	var o []grpc.CallOption
	if header != nil {
		o = append(o, grpc.Header(header))
	}
	if trailer != nil {
		o = append(o, grpc.Trailer(trailer))
	}
	return o
}
