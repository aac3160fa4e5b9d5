//lint:file-ignore SA1019 some gRPC servers speak only the v1alpha reflection service, which try falls back to when v1 is missing

package try

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	rpbalpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgegrpc"
)

// GRPCOptions configures a gRPC run: calls of one unary method, its
// request messages in protobuf JSON, sent in turn.
type GRPCOptions struct {
	// Method is the full method name, "package.Service/Method" (a
	// leading slash may be written).
	Method string
	// Requests are the request messages, each in protobuf JSON
	// (protojson), sent in turn. At least one.
	Requests []string
	// Protoset is a serialized FileDescriptorSet that holds the method's
	// service, as protoc --include_imports -o FILE writes it (imports it
	// lacks are looked up among the well-known types). Nil asks the
	// first replica by server reflection (grpc.reflection.v1, or
	// v1alpha).
	Protoset []byte
	// Idempotent is the user's word that the method may be called twice
	// for one request: gRPC carries no mark of a method's safety, and a
	// hedge sends a call twice, so a run without it is refused
	// (ErrNotIdempotent).
	Idempotent bool
	// TLS dials the replicas with TLS (the system's roots); without it,
	// plaintext.
	TLS bool
}

// maxGRPCFiles bounds the files fetched by reflection for one method.
const maxGRPCFiles = 1000

// validate checks o and the metadata to send with it.
func (g *GRPCOptions) validate(header http.Header) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...))
	}
	if _, _, err := splitMethod(g.Method); err != nil {
		bad("%v", err)
	}
	if len(g.Requests) == 0 {
		bad("no request messages: give --requests FILE (one JSON message a line) or --data '{...}'")
	}
	if !g.Idempotent {
		errs = append(errs, fmt.Errorf("%w: %s: a hedge sends a call a second time, to another replica, and gRPC carries no mark of which methods are safe to call twice; try hedges a method only on your word: if two calls have the effect of one (a read, or a write your service deduplicates), add --idempotent, otherwise do not hedge it", ErrNotIdempotent, strings.TrimPrefix(g.Method, "/")))
	}
	for name := range header {
		n := strings.ToLower(name)
		switch {
		case !validHeaderName(name):
			bad("metadata %q: not a valid name", name)
		case strings.HasPrefix(n, "grpc-") || n == "content-type" || n == "te" || strings.HasPrefix(n, ":"):
			bad("metadata %q: the name is reserved by gRPC: choose another", n)
		}
	}
	return errs
}

// splitMethod splits "package.Service/Method" (with or without a leading
// slash) into the service's full name and the method's.
func splitMethod(m string) (svc, method string, err error) {
	s := strings.TrimPrefix(m, "/")
	svc, method, ok := strings.Cut(s, "/")
	if !ok || svc == "" || method == "" || strings.Contains(method, "/") || !protoreflect.FullName(svc).IsValid() || !protoreflect.Name(method).IsValid() {
		return "", "", fmt.Errorf("--method %q: write the full method name, package.Service/Method, such as grpc.health.v1.Health/Check", m)
	}
	return svc, method, nil
}

// parseGRPCAddr checks a gRPC replica, host:port, and returns it in
// normal form.
func parseGRPCAddr(s string) (string, error) {
	if strings.Contains(s, "://") || strings.Contains(s, "@") {
		return "", fmt.Errorf("%q: write host:port, such as 10.0.0.1:50051 (no scheme: add --tls for TLS; credentials go in metadata with --header-env)", redactUser(s))
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return "", fmt.Errorf("%q: write host:port, such as 10.0.0.1:50051", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

// redactUser drops anything before an '@' in an address, which may be a
// credential.
func redactUser(s string) string {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		scheme := ""
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			scheme = s[:j+3]
		}
		return scheme + "<redacted>@" + s[i+1:]
	}
	return s
}

// grpcProto sends calls of one unary method through hedgegrpc.
type grpcProto struct {
	o          *Options
	creds      credentials.TransportCredentials
	md         metadata.MD
	method     protoreflect.MethodDescriptor
	fullMethod string // "/package.Service/Method"
	reqs       []*dynamicpb.Message
}

// newGRPC finds the method's descriptors and parses the requests.
func newGRPC(ctx context.Context, o *Options) (*grpcProto, error) {
	g := o.GRPC
	p := &grpcProto{o: o, md: metadata.MD{}, creds: insecure.NewCredentials()}
	if g.TLS {
		p.creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	for name, vs := range o.Header {
		p.md[strings.ToLower(name)] = slices.Clone(vs)
	}
	svc, m, _ := splitMethod(g.Method) // Validate checked
	p.fullMethod = "/" + svc + "/" + m
	var files *protoregistry.Files
	var err error
	if g.Protoset != nil {
		files, err = protosetFiles(g.Protoset, svc)
	} else {
		files, err = p.reflectFiles(ctx, svc)
	}
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(svc))
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if err != nil || !ok {
		return nil, fmt.Errorf("%w: no service %s in the descriptors: check --method", ErrDescriptors, svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(m))
	if md == nil {
		var names []string
		for i := range sd.Methods().Len() {
			names = append(names, string(sd.Methods().Get(i).Name()))
		}
		return nil, fmt.Errorf("%w: service %s has no method %s; it has %s", ErrDescriptors, svc, m, strings.Join(names, ", "))
	}
	if md.IsStreamingClient() || md.IsStreamingServer() {
		return nil, fmt.Errorf("%w: %s streams (client, server or both): try sends unary calls only, and hedgegrpc hedges only those", ErrStreaming, p.fullMethod[1:])
	}
	p.method = md
	for i, js := range g.Requests {
		msg := dynamicpb.NewMessage(md.Input())
		if err := protojson.Unmarshal([]byte(js), msg); err != nil {
			return nil, fmt.Errorf("%w: request %d is not a %s in JSON: %v", ErrTargets, i+1, md.Input().FullName(), err)
		}
		p.reqs = append(p.reqs, msg)
	}
	return p, nil
}

func (p *grpcProto) requests() (int, map[string]int) {
	return len(p.reqs), map[string]int{p.fullMethod: len(p.reqs)}
}

func (p *grpcProto) close() {}

// protosetFiles reads a serialized FileDescriptorSet, for the service svc.
func protosetFiles(b []byte, svc string) (*protoregistry.Files, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%w: --protoset is not a FileDescriptorSet (make one with protoc --include_imports -o FILE): %v", ErrDescriptors, err)
	}
	fds := map[string]*descriptorpb.FileDescriptorProto{}
	for _, fd := range set.GetFile() {
		fds[fd.GetName()] = fd
	}
	return buildFiles(fds, "--protoset", svc)
}

// buildFiles makes a registry of the files of fds that define the service
// svc, each after its imports; an import fds lacks is taken from the
// well-known types linked into this program (protoregistry.GlobalFiles),
// if there. from names where fds came from, for the errors.
func buildFiles(fds map[string]*descriptorpb.FileDescriptorProto, from, svc string) (*protoregistry.Files, error) {
	files := new(protoregistry.Files)
	state := map[string]int{} // 1: being added, 2: added
	var add func(name string) error
	add = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("%w: %s: %s imports itself", ErrDescriptors, from, name)
		case 2:
			return nil
		}
		fd, ok := fds[name]
		if !ok {
			gd, err := protoregistry.GlobalFiles.FindFileByPath(name)
			if err != nil {
				return fmt.Errorf("%w: %s lacks %s (with a descriptor set, make it with protoc --include_imports)", ErrDescriptors, from, name)
			}
			state[name] = 2
			return files.RegisterFile(gd)
		}
		state[name] = 1
		for _, dep := range fd.GetDependency() {
			if err := add(dep); err != nil {
				return err
			}
		}
		f, err := protodesc.NewFile(fd, files)
		if err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrDescriptors, from, name, err)
		}
		state[name] = 2
		return files.RegisterFile(f)
	}
	found := false
	for _, name := range sortedKeys(fds) {
		if !definesService(fds[name], svc) {
			continue
		}
		found = true
		if err := add(name); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s holds no service %s: check --method", ErrDescriptors, from, svc)
	}
	return files, nil
}

// definesService reports whether fd defines the service of full name svc.
func definesService(fd *descriptorpb.FileDescriptorProto, svc string) bool {
	for _, sd := range fd.GetService() {
		name := sd.GetName()
		if fd.GetPackage() != "" {
			name = fd.GetPackage() + "." + name
		}
		if name == svc {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// reflector asks a server's reflection service for files: those that
// define symbol, or the file named filename. It returns them serialized.
type reflector func(symbol, filename string) ([][]byte, error)

// reflectFiles asks the first replica, by server reflection (v1, or
// v1alpha when v1 is not offered), for the file that defines the service
// and the files it imports.
func (p *grpcProto) reflectFiles(ctx context.Context, svc string) (*protoregistry.Files, error) {
	ctx, cancel := context.WithTimeout(ctx, min(p.o.Timeout, 30*time.Second)+5*time.Second)
	defer cancel()
	if len(p.md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, p.md.Copy())
	}
	conn, err := grpc.NewClient(p.o.Replicas[0], grpc.WithTransportCredentials(p.creds), grpc.WithNoProxy())
	if err != nil {
		return nil, fmt.Errorf("%w: reflection: %v", ErrDescriptors, err)
	}
	defer conn.Close()
	fds, err := fetchFiles(ctx, reflectV1(ctx, conn), svc)
	if status.Code(err) == codes.Unimplemented {
		fds, err = fetchFiles(ctx, reflectV1alpha(ctx, conn), svc)
	}
	switch {
	case status.Code(err) == codes.Unimplemented:
		return nil, fmt.Errorf("%w: %s offers no server reflection: give the method's descriptors with --protoset FILE (protoc --include_imports -o FILE your.proto)", ErrDescriptors, p.o.Replicas[0])
	case status.Code(err) == codes.NotFound:
		return nil, fmt.Errorf("%w: %s knows no service %s (by server reflection): check --method", ErrDescriptors, p.o.Replicas[0], svc)
	case err != nil:
		return nil, fmt.Errorf("%w: asking %s by server reflection: %v (or give --protoset FILE)", ErrDescriptors, p.o.Replicas[0], err)
	}
	return buildFiles(fds, "server reflection of "+p.o.Replicas[0], svc)
}

// fetchFiles asks ask for the file defining symbol, then for every file
// it imports, transitively; imports the server does not know are left
// for buildFiles to find among the well-known types.
func fetchFiles(ctx context.Context, ask reflector, symbol string) (map[string]*descriptorpb.FileDescriptorProto, error) {
	fds := map[string]*descriptorpb.FileDescriptorProto{}
	add := func(raw [][]byte) error {
		for _, b := range raw {
			fd := new(descriptorpb.FileDescriptorProto)
			if err := proto.Unmarshal(b, fd); err != nil {
				return fmt.Errorf("a file descriptor that does not parse: %v", err)
			}
			fds[fd.GetName()] = fd
		}
		return nil
	}
	raw, err := ask(symbol, "")
	if err != nil {
		return nil, err
	}
	if err := add(raw); err != nil {
		return nil, err
	}
	unknown := map[string]bool{}
	for more := true; more; {
		more = false
		for _, name := range sortedKeys(fds) {
			for _, dep := range fds[name].GetDependency() {
				if fds[dep] != nil || unknown[dep] {
					continue
				}
				if len(fds) >= maxGRPCFiles {
					return nil, fmt.Errorf("more than %d files", maxGRPCFiles)
				}
				raw, err := ask("", dep)
				if status.Code(err) == codes.NotFound {
					unknown[dep] = true
					continue
				}
				if err != nil {
					return nil, err
				}
				if err := add(raw); err != nil {
					return nil, err
				}
				if fds[dep] == nil {
					unknown[dep] = true
				}
				more = true
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return fds, nil
}

// reflectV1 returns a reflector over grpc.reflection.v1. Its stream is
// opened on the first question and ends with ctx.
func reflectV1(ctx context.Context, conn *grpc.ClientConn) reflector {
	var stream rpb.ServerReflection_ServerReflectionInfoClient
	return func(symbol, filename string) ([][]byte, error) {
		if stream == nil {
			s, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err != nil {
				return nil, err
			}
			stream = s
		}
		req := &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{FileByFilename: filename}}
		if symbol != "" {
			req.MessageRequest = &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}
		}
		if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		resp, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if e := resp.GetErrorResponse(); e != nil {
			return nil, status.Error(codes.Code(e.GetErrorCode()), e.GetErrorMessage())
		}
		return resp.GetFileDescriptorResponse().GetFileDescriptorProto(), nil
	}
}

// reflectV1alpha is reflectV1 over grpc.reflection.v1alpha, for servers
// that offer only the older version.
func reflectV1alpha(ctx context.Context, conn *grpc.ClientConn) reflector {
	var stream rpbalpha.ServerReflection_ServerReflectionInfoClient
	return func(symbol, filename string) ([][]byte, error) {
		if stream == nil {
			s, err := rpbalpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err != nil {
				return nil, err
			}
			stream = s
		}
		req := &rpbalpha.ServerReflectionRequest{MessageRequest: &rpbalpha.ServerReflectionRequest_FileByFilename{FileByFilename: filename}}
		if symbol != "" {
			req.MessageRequest = &rpbalpha.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}
		}
		if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		resp, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if e := resp.GetErrorResponse(); e != nil {
			return nil, status.Error(codes.Code(e.GetErrorCode()), e.GetErrorMessage())
		}
		return resp.GetFileDescriptorResponse().GetFileDescriptorProto(), nil
	}
}

// grpcClient is the client of one arm: one ClientConn per replica, each
// with the arm's hedgegrpc Interceptor and, after it, an interceptor that
// records each copy.
type grpcClient struct {
	p     *grpcProto
	h     *hedge.Hedger
	conns []*grpc.ClientConn
}

func (c *grpcClient) hedger() *hedge.Hedger { return c.h }

func (p *grpcProto) newClient(cfg hedge.Config) (sender, error) {
	cfg.Replicas = len(p.o.Replicas)
	if cfg.Retryable == nil {
		// A status other than UNAVAILABLE is the service's answer, not a
		// reason to send the next copy at once.
		cfg.Retryable = hedgegrpc.NonFatal(codes.Unavailable)
	}
	h, err := hedge.New(cfg)
	if err != nil {
		return nil, err
	}
	var ic *hedgegrpc.Interceptor // set below, before the first call
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return ic.Unary(ctx, method, req, reply, cc, invoker, opts...)
	}
	c := &grpcClient{p: p, h: h}
	for j, addr := range p.o.Replicas {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(p.creds), grpc.WithNoProxy(),
			grpc.WithChainUnaryInterceptor(unary, countCopies(j)))
		if err != nil {
			c.close()
			return nil, err
		}
		c.conns = append(c.conns, conn)
	}
	if ic, err = hedgegrpc.New(h, hedgegrpc.WithReplicas(c.conns...)); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// countCopies returns the interceptor that records each copy sent on the
// conn of replica j in the trace of its call.
func countCopies(j int) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if tr := traceOf(ctx); tr != nil {
			idx := 0
			if md, ok := metadata.FromOutgoingContext(ctx); ok {
				if v := md.Get(hedgegrpc.PreviousAttemptsKey); len(v) > 0 {
					idx, _ = strconv.Atoi(v[len(v)-1])
				}
			}
			code := status.Code(err)
			failed := err != nil && (code == codes.Canceled || ctx.Err() != nil || isGRPCConnErr(err))
			tr.add(copyRec{replica: j, index: idx, dur: time.Since(start), failed: failed, ok: err == nil})
		}
		return err
	}
}

func (c *grpcClient) close() {
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// send calls the method with request i.
func (c *grpcClient) send(ctx context.Context, i int) outcome {
	p := c.p
	if len(p.md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, p.md.Copy())
	}
	reply := dynamicpb.NewMessage(p.method.Output())
	var trailer metadata.MD
	err := c.conns[0].Invoke(ctx, p.fullMethod, p.reqs[i%len(p.reqs)], reply, grpc.Trailer(&trailer))
	out := grpcOutcome(ctx, err, trailer)
	if err == nil {
		if tr := traceOf(ctx); tr != nil {
			tr.markFirstOK()
		}
	}
	return out
}

// grpcOutcome classifies a call's end. As HTTP's 4xx are answers, so are
// the codes of a request the service refused (NOT_FOUND,
// INVALID_ARGUMENT, PERMISSION_DENIED, ...); the codes of a service
// failing (UNKNOWN, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS,
// ABORTED, RESOURCE_EXHAUSTED, a DEADLINE_EXCEEDED of the server's) are
// errors, with a latency, like 5xx. RESOURCE_EXHAUSTED is pushback, like
// 429, and so is UNAVAILABLE with a grpc-retry-pushback-ms trailer, like
// a 5xx with Retry-After.
func grpcOutcome(ctx context.Context, err error, trailer metadata.MD) outcome {
	code := status.Code(err)
	out := outcome{status: codeName(code), answered: true}
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return outcome{kind: kindTimeout, answered: true}
	case isGRPCConnErr(err):
		return outcome{kind: kindConnect}
	case code == codes.Canceled:
		return outcome{kind: kindOther}
	case code == codes.Unknown || code == codes.Unimplemented || code == codes.Internal || code == codes.Unavailable ||
		code == codes.DataLoss || code == codes.Aborted || code == codes.ResourceExhausted || code == codes.DeadlineExceeded:
		out.kind = "status " + codeName(code)
	}
	pb := trailer.Get(hedgegrpc.PushbackKey)
	if code == codes.ResourceExhausted || (code == codes.Unavailable && len(pb) > 0) {
		out.pushback = true
		if len(pb) == 1 {
			if ms, err := strconv.ParseInt(strings.TrimSpace(pb[0]), 10, 64); err == nil && ms >= 0 {
				out.retryAfter = max(time.Duration(min(ms, int64(maxPause/time.Millisecond)))*time.Millisecond, time.Millisecond)
			}
		}
	}
	return out
}

// isGRPCConnErr reports whether err is gRPC's for a connection that could
// not be made or was lost: no answer.
func isGRPCConnErr(err error) bool {
	if status.Code(err) != codes.Unavailable {
		return false
	}
	m := status.Convert(err).Message()
	return strings.Contains(m, "connection error") || strings.Contains(m, "error reading from server") || strings.Contains(m, "while dialing")
}

// codeNames are the canonical names of the status codes.
var codeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
	"PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
	"UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "CODE_" + strconv.Itoa(int(c))
}
