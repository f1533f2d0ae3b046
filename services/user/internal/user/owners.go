package user

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// ownersMigration is the id of the record that says AssignOwners ran to
// the end once.
const ownersMigration = "permission-owners-v1"

// flatIndex is the "-<i>" seed 002's flat body appends to a user's name
// for each of a list of permissions.
var flatIndex = regexp.MustCompile(`^-[0-9]+$`)

// owners are the users of a logical cloud a permission named name was
// made for by seed 002's flat body: the user of that name, or the user u
// of a name "u-<i>" (both when both exist).
func owners(users []string, name string) []string {
	var out []string
	for _, u := range users {
		if rest, ok := strings.CutPrefix(name, u); ok && (rest == "" || flatIndex.MatchString(rest)) {
			out = append(out, u)
		}
	}
	return out
}

// AssignOwners gives the permissions that seed 002's flat body stored
// before permissions named their users to the users they were made for:
// then every permission was bound to every user of the logical cloud, and
// one user held another's rights. Only logical clouds with two users or
// more are concerned (a logical cloud with one user bound it to that user
// anyway; only a flat body makes more than one), and only permissions
// without users named as the flat body names them ("<user>",
// "<user>-<i>"); a permission added later at .../user-permissions under
// such a name is narrowed to that user too, never widened. It runs once
// per store (a record marks it done) and answers how many permissions it
// changed; the next update of each logical cloud applies the bindings.
func (s *Service) AssignOwners(ctx context.Context) (int, error) {
	if _, err := s.migrations.Get(ctx, ownersMigration); err == nil {
		return 0, nil
	} else if errs.Code(err) != codes.NotFound {
		return 0, err
	}
	users, err := s.users.All(ctx)
	if err != nil {
		return 0, err
	}
	byCloud := map[string][]string{}
	for _, u := range users {
		if !u.Deleting {
			parent := u.ID[:strings.LastIndexByte(u.ID, '/')]
			byCloud[parent] = append(byCloud[parent], u.Msg.GetName())
		}
	}
	perms, err := s.perms.All(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range perms {
		parent := p.ID[:strings.LastIndexByte(p.ID, '/')]
		names := byCloud[parent]
		if p.Deleting || len(p.Msg.GetUsers()) > 0 || len(names) < 2 {
			continue
		}
		slices.Sort(names)
		who := owners(names, p.Msg.GetPermissionName())
		if len(who) == 0 {
			continue
		}
		p.Msg.Users = who
		switch err := s.perms.Update(ctx, p.ID, p.Version, p.Msg); errs.Code(err) {
		case codes.OK:
			n++
		case codes.Aborted, codes.NotFound:
			// Changed or deleted meanwhile: its writer decided.
		default:
			return n, err
		}
	}
	err = s.migrations.Create(ctx, ownersMigration, "", &typesv1.Metadata{Name: ownersMigration,
		Description: "permissions of seed 002 flat bodies given to their users"})
	if err != nil && errs.Code(err) != codes.AlreadyExists {
		return n, err
	}
	return n, nil
}
