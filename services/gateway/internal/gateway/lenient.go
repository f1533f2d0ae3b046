package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// lenientPackage is the one package whose request bodies are read in the
// seed's shapes (docs/traffic.md "Body shapes"): seed 004 writes flags as
// JSON strings and connectivity resources as one-key objects.
const lenientPackage = "dcm.traffic.v1"

// oneKeyLists are the list fields whose items may be written as
// {"<id>": {...}}: the key becomes the item's id.
var oneKeyLists = []string{"connectivityResource"}

// lenientJSON is the gateway's JSON marshaler with a decoder that rewrites
// lenientPackage's bodies into protojson's shapes before decoding them;
// every other body is decoded as sent. Unknown fields are still refused:
// the rewritten body goes through the same protojson decoder.
type lenientJSON struct {
	*runtime.JSONPb
}

// NewDecoder implements runtime.Marshaler. A body that is not JSON is
// refused saying where it stops being JSON (syntaxAt).
func (l *lenientJSON) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		// readBody has read the body whole already: this copies it.
		raw, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		return syntaxAt(raw, l.decode(bytes.NewReader(raw), v))
	})
}

// syntaxAt is err, and if it is a JSON syntax error in raw, the line
// and column of the byte it stopped at (the seeds' // comments, say).
func syntaxAt(raw []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) || se.Offset < 1 || se.Offset > int64(len(raw)) {
		return err
	}
	before := raw[:se.Offset-1]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return fmt.Errorf("%w (line %d, column %d)", err, line, col)
}

// decode decodes r into v.
func (l *lenientJSON) decode(r io.Reader, v any) error {
	md := descriptorOf(v)
	if md == nil || md.ParentFile().Package() != lenientPackage {
		return l.JSONPb.NewDecoder(r).Decode(v)
	}
	var body any
	d := json.NewDecoder(r)
	d.UseNumber()
	if err := d.Decode(&body); err != nil {
		// io.EOF (no body) is the caller's to accept.
		return err
	}
	if err := rewrite(body, md, ""); err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return l.JSONPb.NewDecoder(bytes.NewReader(b)).Decode(v)
}

// descriptorOf is the message v decodes into: grpc-gateway passes the
// body field's address (a pointer to the message pointer) or a message.
func descriptorOf(v any) protoreflect.MessageDescriptor {
	if m, ok := v.(proto.Message); ok {
		return m.ProtoReflect().Descriptor()
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Pointer {
		return nil
	}
	m, ok := reflect.New(rv.Elem().Type().Elem()).Interface().(proto.Message)
	if !ok {
		return nil
	}
	return m.ProtoReflect().Descriptor()
}

// decodeFailure is a body the rewrite refuses; its message has the shape
// decodeError lifts the field from.
func decodeFailure(path, format string, args ...any) error {
	return fmt.Errorf("parsing field %q: %s", path, fmt.Sprintf(format, args...))
}

// rewrite turns the seed's shapes in v, a JSON value of message md at
// path, into protojson's, in place.
func rewrite(v any, md protoreflect.MessageDescriptor, path string) error {
	obj, ok := v.(map[string]any)
	if !ok || strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return nil // protojson reports a wrong type; well-known types have their own JSON
	}
	for k, val := range obj {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(k))
		}
		if fd == nil {
			continue // unknown: protojson refuses it, naming it
		}
		p := k
		if path != "" {
			p = path + "." + k
		}
		switch {
		case fd.IsMap():
			if m, ok := val.(map[string]any); ok && fd.MapValue().Kind() == protoreflect.MessageKind {
				for mk, mv := range m {
					if err := rewrite(mv, fd.MapValue().Message(), p+"."+mk); err != nil {
						return err
					}
				}
			}
		case fd.IsList():
			items, ok := val.([]any)
			if !ok {
				continue
			}
			for i, it := range items {
				ip := fmt.Sprintf("%s[%d]", p, i)
				switch fd.Kind() {
				case protoreflect.BoolKind:
					b, err := flag(ip, it)
					if err != nil {
						return err
					}
					items[i] = b
				case protoreflect.MessageKind:
					if slices.Contains(oneKeyLists, fd.JSONName()) {
						flat, err := unwrapOneKey(ip, it)
						if err != nil {
							return err
						}
						items[i] = flat
						it = flat
					}
					if err := rewrite(it, fd.Message(), ip); err != nil {
						return err
					}
				}
			}
		case fd.Kind() == protoreflect.BoolKind:
			b, err := flag(p, val)
			if err != nil {
				return err
			}
			obj[k] = b
		case fd.Kind() == protoreflect.MessageKind:
			if err := rewrite(val, fd.Message(), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// flag reads a bool written as a JSON boolean or as "true"/"false".
func flag(path string, v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return v, nil // a boolean, or a wrong type protojson reports
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return nil, decodeFailure(path, "a flag is true or false (or \"true\", \"false\"), not %q", s)
}

// unwrapOneKey turns {"<id>": {...}} into {"id": "<id>", ...}; any other
// item is left as it is.
func unwrapOneKey(path string, v any) (any, error) {
	obj, ok := v.(map[string]any)
	if !ok || len(obj) != 1 {
		return v, nil
	}
	for id, inner := range obj {
		in, ok := inner.(map[string]any)
		if !ok {
			return v, nil
		}
		if cur, has := in["id"]; has && cur != id {
			return nil, decodeFailure(path+".id", "the item's key %q and its id differ: give one, or both the same", id)
		}
		in["id"] = id
		return in, nil
	}
	return v, nil
}
