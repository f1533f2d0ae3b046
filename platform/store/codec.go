package store

import (
	"encoding/base64"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Reading a record's body. A body is the document of its message's
// protobuf JSON form (toBSON), so the plain way back is the way it came:
// the document as relaxed extended JSON, read by protojson. That costs
// two encodings per record (about 25 µs for a logical cloud, 25 ms for a
// page of 1,000, docs/benchmarks.md). decodeBody reads the document into
// the message directly, field by field through protoreflect, taking each
// BSON value as protojson takes the JSON value relaxed extended JSON
// gives for it. What it does not read itself (the well-known types, whose
// JSON forms are special, a value of a type it does not expect, a number
// out of its field's range) it hands to the plain way: decodeBody sets
// what protojson would set, or fails where protojson would
// (TestDecodeBodyAsProtojson).

// errPlain says a value is read the plain way (protojson).
var errPlain = errors.New("read as protojson")

// decodeBody sets msg from body, as fromBSON does.
func decodeBody(body bson.Raw, msg proto.Message) error {
	m := msg.ProtoReflect()
	if plainOnly(m.Descriptor()) {
		return fromBSON(body, msg)
	}
	if err := decodeMessage(body, m); err != nil {
		if !errors.Is(err, errPlain) {
			return err
		}
		proto.Reset(msg)
		return fromBSON(body, msg)
	}
	return nil
}

// plainOnly says messages of md are read by protojson: the well-known
// types (Timestamp, Struct, Value, wrappers, Any...) have JSON forms of
// their own.
func plainOnly(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.")
}

func decodeMessage(doc bson.Raw, m protoreflect.Message) error {
	els, err := doc.Elements()
	if err != nil {
		return err
	}
	fields := m.Descriptor().Fields()
	for _, el := range els {
		key, err := el.KeyErr()
		if err != nil {
			return err
		}
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		if fd == nil {
			continue // unknown: discarded, as protojson's DiscardUnknown
		}
		v := el.Value()
		if v.Type == bson.TypeNull {
			if fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value" {
				return errPlain
			}
			continue // null leaves a field unset
		}
		switch {
		case fd.IsList():
			if err := decodeList(v, fd, m.Mutable(fd).List()); err != nil {
				return err
			}
		case fd.IsMap():
			if err := decodeMap(v, fd, m.Mutable(fd).Map()); err != nil {
				return err
			}
		case fd.Message() != nil:
			if err := decodeInto(v, fd.Message(), m.Mutable(fd).Message()); err != nil {
				return err
			}
		default:
			pv, err := scalar(v, fd)
			if err != nil {
				return err
			}
			m.Set(fd, pv)
		}
	}
	return nil
}

// decodeInto reads value v, a message of md, into m.
func decodeInto(v bson.RawValue, md protoreflect.MessageDescriptor, m protoreflect.Message) error {
	if md.FullName() == "google.protobuf.Timestamp" {
		return decodeTimestamp(v, m)
	}
	if plainOnly(md) {
		return errPlain
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return errPlain
	}
	return decodeMessage(doc, m)
}

// The range of a Timestamp: 0001-01-01 to 9999-12-31 (protojson's).
const (
	minTimestampSeconds = -62135596800
	maxTimestampSeconds = 253402300799
)

// decodeTimestamp reads a Timestamp (the well-known type every record's
// lifecycle has) as protojson reads its JSON form, an RFC 3339 string,
// with protojson's checks of its range and of at most 9 fractional digits.
func decodeTimestamp(v bson.RawValue, m protoreflect.Message) error {
	s, ok := v.StringValueOK()
	if !ok {
		return errPlain
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return errPlain
	}
	secs := t.Unix()
	if secs < minTimestampSeconds || secs > maxTimestampSeconds {
		return errPlain
	}
	i, j := strings.LastIndexByte(s, '.'), strings.LastIndexAny(s, "Z-+")
	if i >= 0 && j >= i && j-i > len(".999999999") {
		return errPlain
	}
	fields := m.Descriptor().Fields()
	m.Set(fields.ByName("seconds"), protoreflect.ValueOfInt64(secs))
	m.Set(fields.ByName("nanos"), protoreflect.ValueOfInt32(int32(t.Nanosecond())))
	return nil
}

func decodeList(v bson.RawValue, fd protoreflect.FieldDescriptor, l protoreflect.List) error {
	arr, ok := v.ArrayOK()
	if !ok {
		return errPlain
	}
	vals, err := arr.Values()
	if err != nil {
		return err
	}
	for _, e := range vals {
		pv, err := element(e, fd, l.NewElement)
		if err != nil {
			return err
		}
		l.Append(pv)
	}
	return nil
}

// element is e, an element of a list or a map's value of kind fd (a new
// message from newMsg if fd is a message); a null is errPlain (protojson
// refuses it there).
func element(e bson.RawValue, fd protoreflect.FieldDescriptor, newMsg func() protoreflect.Value) (protoreflect.Value, error) {
	if e.Type == bson.TypeNull {
		return protoreflect.Value{}, errPlain
	}
	md := fd.Message()
	if md == nil {
		return scalar(e, fd)
	}
	v := newMsg()
	if err := decodeInto(e, md, v.Message()); err != nil {
		return protoreflect.Value{}, err
	}
	return v, nil
}

func decodeMap(v bson.RawValue, fd protoreflect.FieldDescriptor, mp protoreflect.Map) error {
	doc, ok := v.DocumentOK()
	if !ok {
		return errPlain
	}
	els, err := doc.Elements()
	if err != nil {
		return err
	}
	kd, vd := fd.MapKey(), fd.MapValue()
	for _, el := range els {
		key, err := el.KeyErr()
		if err != nil {
			return err
		}
		mk, err := mapKey(key, kd)
		if err != nil {
			return err
		}
		pv, err := element(el.Value(), vd, mp.NewValue)
		if err != nil {
			return err
		}
		mp.Set(mk, pv)
	}
	return nil
}

func mapKey(key string, kd protoreflect.FieldDescriptor) (protoreflect.MapKey, error) {
	switch kd.Kind() {
	case protoreflect.StringKind:
		if !utf8.ValidString(key) {
			return protoreflect.MapKey{}, errPlain
		}
		return protoreflect.ValueOfString(key).MapKey(), nil
	case protoreflect.BoolKind:
		switch key {
		case "true":
			return protoreflect.ValueOfBool(true).MapKey(), nil
		case "false":
			return protoreflect.ValueOfBool(false).MapKey(), nil
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if n, err := strconv.ParseInt(key, 10, 32); err == nil {
			return protoreflect.ValueOfInt32(int32(n)).MapKey(), nil
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if n, err := strconv.ParseInt(key, 10, 64); err == nil {
			return protoreflect.ValueOfInt64(n).MapKey(), nil
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if n, err := strconv.ParseUint(key, 10, 32); err == nil {
			return protoreflect.ValueOfUint32(uint32(n)).MapKey(), nil
		}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if n, err := strconv.ParseUint(key, 10, 64); err == nil {
			return protoreflect.ValueOfUint64(n).MapKey(), nil
		}
	}
	return protoreflect.MapKey{}, errPlain
}

// scalar is value v of scalar field fd. Anything but the forms protojson
// writes and reads back the same way (an enum name the enum does not
// have, which DiscardUnknown drops, included) is errPlain.
func scalar(v bson.RawValue, fd protoreflect.FieldDescriptor) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s, ok := v.StringValueOK(); ok && utf8.ValidString(s) {
			return protoreflect.ValueOfString(s), nil
		}
	case protoreflect.BoolKind:
		if b, ok := v.BooleanOK(); ok {
			return protoreflect.ValueOfBool(b), nil
		}
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if ed.FullName() == "google.protobuf.NullValue" {
			break
		}
		if s, ok := v.StringValueOK(); ok {
			if ev := ed.Values().ByName(protoreflect.Name(s)); ev != nil {
				return protoreflect.ValueOfEnum(ev.Number()), nil
			}
		}
		if n, ok := integer(v, math.MinInt32, math.MaxInt32); ok {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), nil
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if n, ok := integer(v, math.MinInt32, math.MaxInt32); ok {
			return protoreflect.ValueOfInt32(int32(n)), nil
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if n, ok := integer(v, math.MinInt64, math.MaxInt64); ok {
			return protoreflect.ValueOfInt64(n), nil
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if n, ok := integer(v, 0, math.MaxUint32); ok {
			return protoreflect.ValueOfUint32(uint32(n)), nil
		}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		// Beyond int64 protojson writes a string too; read the plain way.
		if n, ok := integer(v, 0, math.MaxInt64); ok {
			return protoreflect.ValueOfUint64(uint64(n)), nil
		}
	case protoreflect.DoubleKind:
		if f, ok := float(v); ok {
			return protoreflect.ValueOfFloat64(f), nil
		}
	case protoreflect.FloatKind:
		if f, ok := float(v); ok && !math.IsInf(f, 0) && math.Abs(f) <= math.MaxFloat32 {
			return protoreflect.ValueOfFloat32(float32(f)), nil
		}
	case protoreflect.BytesKind:
		if s, ok := v.StringValueOK(); ok {
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				return protoreflect.ValueOfBytes(b), nil
			}
		}
	}
	return protoreflect.Value{}, errPlain
}

// integer is v as an integer in [lo, hi]: a BSON int32 or int64, or a
// decimal string of one (protojson writes 64-bit integers as strings).
// Doubles, exponents and the like are left to protojson.
func integer(v bson.RawValue, lo, hi int64) (int64, bool) {
	var n int64
	switch v.Type {
	case bson.TypeInt32:
		n = int64(v.Int32())
	case bson.TypeInt64:
		n = v.Int64()
	case bson.TypeString:
		s := v.StringValue()
		if !decimal(s) {
			return 0, false
		}
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return n, n >= lo && n <= hi
}

// decimal says s is an integer as JSON writes one: an optional minus, no
// leading zero, digits only.
func decimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// float is v as a number: a BSON double, int32 or int64 (relaxed JSON
// turns an integral number into one). Strings (NaN, Infinity, exponents)
// are left to protojson.
func float(v bson.RawValue) (float64, bool) {
	switch v.Type {
	case bson.TypeDouble:
		f := v.Double()
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	case bson.TypeInt32:
		return float64(v.Int32()), true
	case bson.TypeInt64:
		return float64(v.Int64()), true
	}
	return 0, false
}
