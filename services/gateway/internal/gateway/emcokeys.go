package gateway

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dcm-project/dcm/platform/errs"
)

// EMCO decodes its bodies with Go's encoding/json: a key names a struct
// field when it equals the field's JSON name ignoring case, and a key that
// names no field is ignored. EMCO's own example files rely on it (the
// cluster references of examples/ write "loadbalancerIp"). In the EMCO
// dialect the gateway reads keys the same way (docs/emco.md, "Keys");
// the project's dialect stays strict.

// IgnoredHeader lists, in an EMCO-dialect answer, the body keys the
// gateway ignored as EMCO would (paths as the body wrote them).
const IgnoredHeader = "Dcm-Ignored-Fields"

// An emcoShape is a JSON object's keys as the rewrite (emco.go) reads them,
// EMCO's spellings and the project's, with the shape of each key's value
// (nil: not looked into; a list's items take the shape). In a closed
// object, which the rewrite flattens, any other key is ignored; in an open
// one it is left for foldMessage to judge after the rewrite.
type emcoShape struct {
	keys   map[string]*emcoShape
	closed bool
}

func shape(closed bool, keys map[string]*emcoShape) *emcoShape {
	return &emcoShape{keys: keys, closed: closed}
}

// The bodies of EMCO's DCM structs (src/orchestrator/common/logicalcloud.go,
// clusterreference.go, src/dcm/pkg/module/userpermissions.go, metadata in
// src/orchestrator/pkg/module/types/types.go), with the project's
// spellings the rewrite also reads.
var (
	emcoMetadataShape   = shape(false, map[string]*emcoShape{"name": nil, "description": nil, "userData1": nil, "userData2": nil})
	emcoPermissionShape = shape(false, map[string]*emcoShape{
		"metadata": emcoMetadataShape,
		"spec":     shape(true, map[string]*emcoShape{"namespace": nil, "apiGroups": nil, "resources": nil, "verbs": nil}),
	})
	emcoShapes = map[string]*emcoShape{
		kindPermission: emcoPermissionShape,
		kindLogicalCloud: shape(false, map[string]*emcoShape{
			"metadata": emcoMetadataShape,
			"spec": shape(false, map[string]*emcoShape{
				"namespace": nil, "labels": nil, "level": nil,
				"user": shape(false, map[string]*emcoShape{"userName": nil, "type": nil, "userPermissions": emcoPermissionShape}),
			}),
		}),
		kindReference: shape(false, map[string]*emcoShape{
			"metadata": emcoMetadataShape, "clusterProvider": nil, "cluster": nil, "loadBalancerIP": nil,
			"spec": shape(true, map[string]*emcoShape{
				"clusterProvider": nil, "cluster": nil, "loadBalancerIP": nil, "certificate": nil,
				"cluster-provider": nil, "cluster-name": nil, "loadbalancer-ip": nil,
			}),
		}),
	}
)

// foldKey renames obj's key k to the one of names it stands for, as EMCO
// decodes it (k itself, else the name equal to it ignoring case), and
// answers that name; ok is false when k names none. Two keys of obj
// standing for one name are an error at path.
func foldKey(obj map[string]any, k string, names []string, path string) (string, bool, error) {
	var to string
	for _, n := range names {
		if n == k {
			return k, true, nil
		}
		if to == "" && strings.EqualFold(n, k) {
			to = n
		}
	}
	if to == "" {
		return "", false, nil
	}
	for other := range obj {
		if other != k && strings.EqualFold(other, to) && (other == to || other < k) {
			return "", false, errs.Invalid(path+to, "is given twice, as %q and %q: give one", other, k)
		}
	}
	obj[to] = obj[k]
	delete(obj, k)
	return to, true, nil
}

// sortedKeys are obj's keys in order, so that folding is deterministic.
func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// foldShape renames obj's keys that name one of s's ignoring case to s's
// spelling, ignores the other keys of a closed object, and does so below;
// it answers the ignored keys' paths.
func foldShape(obj map[string]any, s *emcoShape, path string) ([]string, error) {
	names := make([]string, 0, len(s.keys))
	for n := range s.keys {
		names = append(names, n)
	}
	return foldKeys(obj, names, path, s.closed, func(to string) ([]string, error) {
		var ignored []string
		sub := s.keys[to]
		if sub == nil {
			return nil, nil
		}
		for i, item := range objects(obj[to]) {
			p := path + to + "."
			if i >= 0 {
				p = path + to + "[" + strconv.Itoa(i) + "]."
			}
			got, err := foldShape(item, sub, p)
			if err != nil {
				return nil, err
			}
			ignored = append(ignored, got...)
		}
		return ignored, nil
	})
}

// foldKeys folds each of obj's keys to the one of names it stands for
// (foldKey), drops a key naming none when drop, and runs below on each
// folded key's value; it answers the paths of the keys dropped here and
// below.
func foldKeys(obj map[string]any, names []string, path string, drop bool, below func(to string) ([]string, error)) ([]string, error) {
	var ignored []string
	for _, k := range sortedKeys(obj) {
		to, ok, err := foldKey(obj, k, names, path)
		if err != nil {
			return nil, err
		}
		if !ok {
			if drop {
				delete(obj, k)
				ignored = append(ignored, path+k)
			}
			continue
		}
		got, err := below(to)
		if err != nil {
			return nil, err
		}
		ignored = append(ignored, got...)
	}
	return ignored, nil
}

// objects are v's objects by index: v itself at -1, or a list's objects.
func objects(v any) map[int]map[string]any {
	out := map[int]map[string]any{}
	switch x := v.(type) {
	case map[string]any:
		out[-1] = x
	case []any:
		for i, it := range x {
			if o, ok := it.(map[string]any); ok {
				out[i] = o
			}
		}
	}
	return out
}

// foldMessage reads obj, a JSON object of message md at path, as EMCO
// would: a key naming one of md's fields ignoring case (its JSON name or
// its proto name) is renamed to that name, any other key is ignored; and
// so on below. Well-known types (google.protobuf.Struct, say) keep their
// keys. It answers the ignored keys' paths.
func foldMessage(obj map[string]any, md protoreflect.MessageDescriptor, path string) ([]string, error) {
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return nil, nil
	}
	fields := md.Fields()
	names := make([]string, 0, 2*fields.Len())
	for i := range fields.Len() {
		names = append(names, fields.Get(i).JSONName(), string(fields.Get(i).Name()))
	}
	return foldKeys(obj, names, path, true, func(to string) ([]string, error) {
		fd := fields.ByJSONName(to)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(to))
		}
		return foldValue(obj[to], fd, path+to)
	})
}

// foldValue folds the objects in v, field fd's value at path.
func foldValue(v any, fd protoreflect.FieldDescriptor, path string) ([]string, error) {
	var ignored []string
	add := func(obj map[string]any, md protoreflect.MessageDescriptor, p string) error {
		got, err := foldMessage(obj, md, p)
		ignored = append(ignored, got...)
		return err
	}
	switch {
	case fd.IsMap():
		m, ok := v.(map[string]any)
		if !ok || fd.MapValue().Kind() != protoreflect.MessageKind {
			return nil, nil
		}
		for _, mk := range sortedKeys(m) {
			if obj, ok := m[mk].(map[string]any); ok {
				if err := add(obj, fd.MapValue().Message(), path+"."+mk+"."); err != nil {
					return nil, err
				}
			}
		}
	case fd.Kind() != protoreflect.MessageKind:
	case fd.IsList():
		items, _ := v.([]any)
		for i, it := range items {
			obj, ok := it.(map[string]any)
			if !ok {
				continue
			}
			p := path + "[" + strconv.Itoa(i) + "]."
			// The seed's {"<id>": {...}} items (lenient.go): the key is
			// the item's id, its value the item.
			if id, inner, ok := oneKeyItem(obj, fd); ok {
				obj, p = inner, p+id+"."
			}
			if err := add(obj, fd.Message(), p); err != nil {
				return nil, err
			}
		}
	default:
		if obj, ok := v.(map[string]any); ok {
			if err := add(obj, fd.Message(), path+"."); err != nil {
				return nil, err
			}
		}
	}
	return ignored, nil
}

// oneKeyItem is obj's id and item when obj is one of lenientPackage's
// {"<id>": {...}} list items of fd: one key, which names no field of the
// item, holding an object.
func oneKeyItem(obj map[string]any, fd protoreflect.FieldDescriptor) (string, map[string]any, bool) {
	if fd.ParentFile().Package() != lenientPackage || !slices.Contains(oneKeyLists, fd.JSONName()) || len(obj) != 1 {
		return "", nil, false
	}
	for id, v := range obj {
		inner, ok := v.(map[string]any)
		if !ok || hasFieldFold(fd.Message(), id) {
			return "", nil, false
		}
		return id, inner, true
	}
	return "", nil, false
}

// hasFieldFold reports whether k names one of md's fields ignoring case.
func hasFieldFold(md protoreflect.MessageDescriptor, k string) bool {
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		if strings.EqualFold(fd.JSONName(), k) || strings.EqualFold(string(fd.Name()), k) {
			return true
		}
	}
	return false
}
