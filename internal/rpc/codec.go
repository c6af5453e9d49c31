package rpc

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"weak"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// Request messages that cannot be decoded (a JSON number that overflows a
// float, invalid UTF-8 in a string, malformed wire data) must answer
// INVALID_ARGUMENT with a google.rpc.BadRequest detail, as every other
// validation error does. connect decodes before any interceptor runs and
// wraps a codec's error in a new one, dropping its details; so the codecs
// below record the failure against the message instead, and the observer
// interceptor, which runs next, returns it (decodeFailures.take).

// decodeFailures maps a request message (weakly: an entry never keeps a
// message alive, and goes when its message is collected) to its decode
// error.
type decodeFailures struct {
	// n counts the entries of m, so that take, called for every request,
	// makes no weak pointer and takes no lock while none failed to decode.
	n  atomic.Int64
	mu sync.Mutex
	m  map[weak.Pointer[byte]]*connect.Error // guarded by mu
}

func newDecodeFailures() *decodeFailures {
	return &decodeFailures{m: make(map[weak.Pointer[byte]]*connect.Error)}
}

func messageKey(msg proto.Message) (weak.Pointer[byte], *byte) {
	p := (*byte)(reflect.ValueOf(msg).UnsafePointer())
	return weak.Make(p), p
}

func (d *decodeFailures) put(msg proto.Message, err *connect.Error) {
	k, p := messageKey(msg)
	d.mu.Lock()
	d.m[k] = err
	d.n.Store(int64(len(d.m)))
	d.mu.Unlock()
	runtime.AddCleanup(p, func(k weak.Pointer[byte]) {
		d.mu.Lock()
		delete(d.m, k)
		d.n.Store(int64(len(d.m)))
		d.mu.Unlock()
	}, k)
}

// take returns and forgets the decode error of msg, nil when it decoded.
func (d *decodeFailures) take(msg any) *connect.Error {
	if d.n.Load() == 0 {
		// put stores the count before its codec returns, so a message's
		// own failure is always seen here.
		return nil
	}
	pm, ok := msg.(proto.Message)
	if !ok || reflect.ValueOf(pm).IsNil() {
		return nil
	}
	k, _ := messageKey(pm)
	d.mu.Lock()
	defer d.mu.Unlock()
	err, ok := d.m[k]
	if ok {
		delete(d.m, k)
		d.n.Store(int64(len(d.m)))
	}
	return err
}

// checkedConn returns the recorded decode error from Receive (streams
// receive their request inside the interceptor chain).
type checkedConn struct {
	connect.StreamingHandlerConn
	failures *decodeFailures
}

func (c checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	if err := c.failures.take(msg); err != nil {
		return err
	}
	return nil
}

// codec is connect's protobuf binary or JSON codec, with decode failures
// recorded in failures rather than returned (see above).
type codec struct {
	name     string
	json     bool
	failures *decodeFailures
}

func (c *codec) Name() string   { return c.name }
func (c *codec) IsBinary() bool { return !c.json }

func (c *codec) Marshal(msg any) ([]byte, error) { return c.MarshalAppend(nil, msg) }

// MarshalAppend appends msg's encoding to dst: connect then encodes into
// its pooled buffers instead of a new slice per response. A
// GetRecordsResponse is written in binary by appendGetRecordsResponse.
func (c *codec) MarshalAppend(dst []byte, msg any) ([]byte, error) {
	pm, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", msg)
	}
	if c.json {
		return protojson.MarshalOptions{}.MarshalAppend(dst, pm)
	}
	if m, ok := pm.(*compactorv1.GetRecordsResponse); ok {
		if out, ok := appendGetRecordsResponse(dst, m); ok {
			return out, nil
		}
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (c *codec) Unmarshal(data []byte, msg any) error {
	pm, ok := msg.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", msg)
	}
	var err error
	switch {
	case c.json && len(data) == 0:
		err = errors.New("empty body is not a JSON object")
	case c.json:
		// Unknown fields are dropped so that clients may be newer.
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, pm)
	default:
		err = proto.Unmarshal(data, pm)
	}
	if err == nil {
		return nil
	}
	field := ""
	if c.json {
		if m := jsonFieldRE.FindStringSubmatch(err.Error()); m != nil {
			field = m[1]
		}
	} else {
		field = invalidUTF8Field(data, pm.ProtoReflect().Descriptor(), "")
	}
	proto.Reset(pm)
	c.failures.put(pm, decodeError(field, err))
	return nil
}

// jsonFieldRE finds the field that protojson names in a value error
// ("invalid value for float field embedding: 1e39").
var jsonFieldRE = regexp.MustCompile(`for \w+ field (\w+)`)

// decodeError is INVALID_ARGUMENT with a BadRequest violation of field (the
// request body when the decoder does not say which field).
func decodeError(field string, err error) *connect.Error {
	desc := "cannot decode: " + truncate(err.Error(), 2*MaxEchoBytes)
	if field == "" {
		field = "body"
	}
	return withBadRequest(connect.NewError(connect.CodeInvalidArgument,
		fmt.Errorf("request %s: %s", field, desc)), violation(field, desc))
}

// invalidUTF8Field returns the path ("records[2].id") of the first string
// field of the wire message data (of type md) that is not valid UTF-8, or
// "" when there is none or the data is malformed.
func invalidUTF8Field(data []byte, md protoreflect.MessageDescriptor, prefix string) string {
	index := map[protoreflect.FieldNumber]int{}
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return ""
		}
		data = data[n:]
		fd := md.Fields().ByNumber(num)
		if typ != protowire.BytesType || fd == nil {
			if n = protowire.ConsumeFieldValue(num, typ, data); n < 0 {
				return ""
			}
			data = data[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return ""
		}
		data = data[n:]
		name := prefix + string(fd.Name())
		if fd.IsList() {
			name = fmt.Sprintf("%s[%d]", name, index[num])
			index[num]++
		}
		switch {
		case fd.IsMap():
			// A map entry is a message of key and value.
			if f := invalidUTF8Field(v, fd.Message(), name+"."); f != "" {
				return f
			}
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
			return name
		case fd.Kind() == protoreflect.MessageKind:
			if f := invalidUTF8Field(v, fd.Message(), name+"."); f != "" {
				return f
			}
		}
	}
	return ""
}

// withCodecs replaces connect's protobuf codecs (binary and both JSON
// names) with codec.
func withCodecs(failures *decodeFailures) connect.HandlerOption {
	return connect.WithHandlerOptions(
		connect.WithCodec(&codec{name: "proto", failures: failures}),
		connect.WithCodec(&codec{name: "json", json: true, failures: failures}),
		connect.WithCodec(&codec{name: "json; charset=utf-8", json: true, failures: failures}),
	)
}

// decodeCheck is the interceptor half of the codec: it returns the recorded
// decode error of a request instead of calling the handler.
func (d *decodeFailures) unary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := d.take(req.Any()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}
