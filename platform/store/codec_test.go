package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	_ "github.com/dcm-project/dcm/gen/dcm/access/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/facts/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/keys/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/user/v1"
)

// TestDecodeBodyAsProtojson checks the direct reader against the plain
// one (fromBSON: relaxed extended JSON read by protojson) on random
// messages of every message type of the project's protos, stored as
// toBSON stores them: both give the same message.
func TestDecodeBodyAsProtojson(t *testing.T) {
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if strings.HasPrefix(string(mt.Descriptor().FullName()), "dcm.") {
			types = append(types, mt)
		}
		return true
	})
	require.Greater(t, len(types), 100, "the project's message types are registered")
	r := rand.New(rand.NewPCG(1, 2))
	direct, all := 0, 0
	for _, mt := range types {
		for i := range 20 {
			msg := mt.New()
			fill(r, msg, 0)
			body, err := toBSON(msg.Interface())
			require.NoError(t, err)
			sameAsPlain(t, fmt.Sprintf("%s #%d", mt.Descriptor().FullName(), i), body, mt)
			all++
			if decodeMessage(body, mt.New()) == nil {
				direct++
			}
		}
	}
	// Most are read directly: the plain way is for the well-known types,
	// NaN and infinities, 64-bit unsigned integers beyond int64.
	require.Greater(t, direct, all/2, "read directly: %d of %d", direct, all)
	t.Logf("read directly: %d of %d", direct, all)
	lc := &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: "lc-1", Description: "d"},
		Spec:      &corev1.LogicalCloudSpec{Namespace: "lc-1", Level: "standard", User: &corev1.LogicalCloudUser{UserName: "u", Type: "certificate"}},
		Lifecycle: &corev1.Lifecycle{Phase: "created", Generation: 3, Changed: timestamppb.Now()}}
	body, err := toBSON(lc)
	require.NoError(t, err)
	require.NoError(t, decodeMessage(body, new(corev1.LogicalCloud).ProtoReflect()), "a logical cloud is read directly")
}

// TestDecodeBodyOddDocuments checks documents toBSON does not write
// (another writer's, or an older version's): wrong types, nulls, unknown
// names, numbers in every form. The direct reader answers as protojson
// does, an error where it fails.
func TestDecodeBodyOddDocuments(t *testing.T) {
	mt := (&corev1.LogicalCloud{}).ProtoReflect().Type()
	for _, doc := range []bson.D{
		{{Key: "metadata", Value: bson.D{{Key: "name", Value: "a"}}}, {Key: "unknown", Value: bson.D{{Key: "x", Value: 1}}}},
		{{Key: "metadata", Value: nil}},
		{{Key: "metadata", Value: "not a document"}},
		{{Key: "metadata", Value: bson.D{{Key: "name", Value: 5}}}},
		{{Key: "metadata", Value: bson.D{{Key: "labels", Value: bson.A{nil}}}}},
		{{Key: "spec", Value: bson.D{{Key: "podSecurity", Value: "baseline"}}}},
		{{Key: "spec", Value: bson.D{{Key: "pod_security", Value: true}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "generation", Value: "12"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "generation", Value: int32(12)}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "generation", Value: 12.0}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "generation", Value: 12.5}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "generation", Value: "012"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "generation", Value: "+12"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "generation", Value: "1e2"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "generation", Value: "-9223372036854775809"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "changed", Value: "2026-12-07T15:04:05.123456789Z"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "changed", Value: "2026-12-07T15:04:05.1234567891Z"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "changed", Value: "2026-12-07T15:04:05+02:00"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "changed", Value: "10000-01-01T00:00:00Z"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "changed", Value: "yesterday"}}}},
		{{Key: "lifecycle", Value: bson.D{{Key: "changed", Value: int32(5)}}}},
	} {
		body, err := bson.Marshal(doc)
		require.NoError(t, err)
		sameAsPlain(t, fmt.Sprint(doc), body, mt)
	}
}

// sameAsPlain decodes body as a message of mt both ways and requires the
// same answer: the same message, or an error from both.
func sameAsPlain(t *testing.T, what string, body bson.Raw, mt protoreflect.MessageType) {
	t.Helper()
	plain, direct := mt.New().Interface(), mt.New().Interface()
	perr := fromBSON(body, plain)
	derr := decodeBody(body, direct)
	if perr != nil {
		require.Error(t, derr, "%s: protojson refused it (%v)", what, perr)
		return
	}
	require.NoError(t, derr, what)
	require.True(t, proto.Equal(plain, direct), "%s: %s\nprotojson: %v\ndirect:    %v", what, body, plain, direct)
}

// fill sets random values in about two thirds of msg's fields, to depth 3.
func fill(r *rand.Rand, msg protoreflect.Message, depth int) {
	switch msg.Descriptor().FullName() {
	case "google.protobuf.Timestamp":
		proto.Merge(msg.Interface(), timestamppb.New(timestamppb.Now().AsTime().Add(-time.Duration(r.Int64N(1e15)))))
		return
	case "google.protobuf.Struct":
		s, _ := structpb.NewStruct(map[string]any{"a": r.Float64(), "b": "x", "c": []any{true, nil}})
		proto.Merge(msg.Interface(), s)
		return
	case "google.protobuf.Value":
		proto.Merge(msg.Interface(), structpb.NewStringValue(randString(r)))
		return
	}
	if depth > 3 || strings.HasPrefix(string(msg.Descriptor().FullName()), "google.protobuf.") {
		return
	}
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if r.IntN(3) == 0 {
			continue
		}
		if od := fd.ContainingOneof(); od != nil && msg.WhichOneof(od) != nil {
			continue
		}
		switch {
		case fd.IsList():
			l := msg.Mutable(fd).List()
			for range r.IntN(4) {
				if fd.Message() != nil {
					e := l.NewElement()
					fill(r, e.Message(), depth+1)
					l.Append(e)
				} else {
					l.Append(randScalar(r, fd))
				}
			}
		case fd.IsMap():
			m := msg.Mutable(fd).Map()
			for range r.IntN(4) {
				k := randScalar(r, fd.MapKey()).MapKey()
				if fd.MapValue().Message() != nil {
					v := m.NewValue()
					fill(r, v.Message(), depth+1)
					m.Set(k, v)
				} else {
					m.Set(k, randScalar(r, fd.MapValue()))
				}
			}
		case fd.Message() != nil:
			fill(r, msg.Mutable(fd).Message(), depth+1)
		default:
			msg.Set(fd, randScalar(r, fd))
		}
	}
}

func randString(r *rand.Rand) string {
	words := []string{"", "a", "lc-00001", "limits.cpu", "requests.nvidia.com/gpu", "é", "日本", "$x", "a\"b", "line\nbreak"}
	return words[r.IntN(len(words))]
}

func randScalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	pick := func(vs ...int64) int64 { return vs[r.IntN(len(vs))] }
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(randString(r))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if r.IntN(8) == 0 {
			return protoreflect.ValueOfEnum(999) // a number the enum does not name
		}
		return protoreflect.ValueOfEnum(vals.Get(r.IntN(vals.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(pick(0, 1, -1, math.MaxInt32, math.MinInt32, r.Int64N(1000))))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(pick(0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxInt32+1, r.Int64()))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(pick(0, 1, math.MaxUint32, r.Int64N(1000))))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64([]uint64{0, 1, math.MaxUint64, math.MaxInt64 + 1, r.Uint64()}[r.IntN(5)])
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{0, 1, -1.5, 1e300, math.NaN(), math.Inf(1), math.SmallestNonzeroFloat64, r.Float64()}[r.IntN(8)])
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32([]float32{0, 1, -1.5, math.MaxFloat32, float32(math.Inf(-1)), r.Float32()}[r.IntN(6)])
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(randString(r)))
	}
	panic(fmt.Sprintf("no random value for %v", fd.Kind()))
}
