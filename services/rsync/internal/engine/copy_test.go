package engine

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// TestCopyResourceCopiesEveryField sets every field of a ResourceStatus
// (found by reflection, so that a field added to the contract fails here
// until copyResource copies it) and compares the copy.
func TestCopyResourceCopiesEveryField(t *testing.T) {
	r := &rsyncv1.ResourceStatus{}
	m := r.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch f.Kind() {
		case protoreflect.StringKind:
			m.Set(f, protoreflect.ValueOfString("v-"+string(f.Name())))
		case protoreflect.Int32Kind:
			m.Set(f, protoreflect.ValueOfInt32(int32(i+1)))
		case protoreflect.Int64Kind:
			m.Set(f, protoreflect.ValueOfInt64(int64(i+1)))
		case protoreflect.BoolKind:
			m.Set(f, protoreflect.ValueOfBool(true))
		case protoreflect.EnumKind:
			m.Set(f, protoreflect.ValueOfEnum(2))
		case protoreflect.MessageKind:
			m.Set(f, protoreflect.ValueOfMessage((&timestamppb.Timestamp{Seconds: int64(i + 100), Nanos: 7}).ProtoReflect()))
		default:
			t.Fatalf("field %s of kind %s: teach this test and copyResource", f.Name(), f.Kind())
		}
	}
	c := copyResource(r)
	if !proto.Equal(r, c) {
		t.Fatalf("copy differs:\n%v\n%v", r, c)
	}
	if c.GetUpdated() == r.GetUpdated() || c.GetNextRetry() == r.GetNextRetry() {
		t.Fatal("timestamps are shared, not copied")
	}
}
