package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"regexp"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/store"
)

// DefaultTokenTTL is how long a token works when the request gives no ttl;
// MaxTokenTTL is the longest a request may ask for.
const (
	DefaultTokenTTL = 30 * 24 * time.Hour
	MaxTokenTTL     = 365 * 24 * time.Hour
)

// Tokens is the token service (AuthService): tokens are "dcm_<id>_<secret>";
// only the id and the SHA-256 of the secret are stored.
type Tokens struct {
	authv1.UnimplementedAuthServiceServer
	tokens   *store.Records[*authv1.TokenRecord]
	projects *store.Records[*corev1.Project]
	now      func() time.Time
}

// NewTokens opens the token collection on st.
func NewTokens(st *store.Store) *Tokens {
	return &Tokens{
		tokens:   store.NewRecords(st, TokensCollection, "token", func() *authv1.TokenRecord { return &authv1.TokenRecord{} }),
		projects: store.NewRecords(st, ProjectsCollection, "project", func() *corev1.Project { return &corev1.Project{} }),
		now:      time.Now,
	}
}

// Register serves the API on r.
func (t *Tokens) Register(r grpc.ServiceRegistrar) { authv1.RegisterAuthServiceServer(r, t) }

// CreateToken implements authv1.AuthServiceServer.
func (t *Tokens) CreateToken(ctx context.Context, req *authv1.CreateTokenRequest) (*authv1.CreateTokenResponse, error) {
	switch {
	case req.GetRole() == pki.RoleAdmin && req.GetProject() != "":
		return nil, errs.Invalid("project", "an admin token is global: leave project empty")
	case req.GetRole() == pki.RoleProjectAdmin && req.GetProject() == "":
		return nil, errs.Invalid("project", "a project-admin token needs the project it administers")
	}
	if p := req.GetProject(); p != "" {
		if _, err := t.projects.Get(ctx, p); err != nil {
			if status.Code(err) == codes.NotFound {
				return nil, errs.Invalid("project", "project %q does not exist", p)
			}
			return nil, err
		}
	}
	ttl := DefaultTokenTTL
	if v := req.GetTtl(); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > MaxTokenTTL {
			return nil, errs.Invalid("ttl", "must be a duration from 1s to 8760h, like \"24h\" or \"3600s\"")
		}
		ttl = d
	}
	id, secret := randomHex(8), randomHex(32)
	now := t.now()
	info := &authv1.Token{
		Id: id, Subject: req.GetSubject(), Role: req.GetRole(), Project: req.GetProject(),
		CreateTime: timestamppb.New(now), ExpireTime: timestamppb.New(now.Add(ttl)),
	}
	sum := sha256.Sum256([]byte(secret))
	if err := t.tokens.Create(ctx, id, "", &authv1.TokenRecord{Token: info, SecretSha256: sum[:]}); err != nil {
		return nil, err
	}
	return &authv1.CreateTokenResponse{Token: "dcm_" + id + "_" + secret, Info: info}, nil
}

// ListTokens implements authv1.AuthServiceServer.
func (t *Tokens) ListTokens(ctx context.Context, req *authv1.ListTokensRequest) (*authv1.ListTokensResponse, error) {
	recs, next, err := t.tokens.ListPage(ctx, "", store.PageOf(req))
	if err != nil {
		return nil, err
	}
	out := make([]*authv1.Token, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.GetToken())
	}
	return &authv1.ListTokensResponse{Tokens: out, NextPageToken: next}, nil
}

// DeleteToken implements authv1.AuthServiceServer.
func (t *Tokens) DeleteToken(ctx context.Context, req *authv1.DeleteTokenRequest) (*authv1.DeleteTokenResponse, error) {
	if err := t.tokens.Delete(ctx, req.GetId()); err != nil {
		return nil, err
	}
	return &authv1.DeleteTokenResponse{}, nil
}

var tokenFormat = regexp.MustCompile(`^dcm_([0-9a-f]{16})_([0-9a-f]{64})$`)

// errBadToken is every reason a token is refused: the caller learns nothing
// about which part was wrong.
var errBadToken = status.Error(codes.Unauthenticated, "invalid or expired token")

// Authenticate implements authv1.AuthServiceServer.
func (t *Tokens) Authenticate(ctx context.Context, req *authv1.AuthenticateRequest) (*authv1.AuthenticateResponse, error) {
	m := tokenFormat.FindStringSubmatch(req.GetToken())
	if m == nil {
		return nil, errBadToken
	}
	rec, err := t.tokens.Get(ctx, m[1])
	if status.Code(err) == codes.NotFound {
		return nil, errBadToken
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(m[2]))
	if subtle.ConstantTimeCompare(sum[:], rec.Msg.GetSecretSha256()) != 1 {
		return nil, errBadToken
	}
	if !t.now().Before(rec.Msg.GetToken().GetExpireTime().AsTime()) {
		return nil, errBadToken
	}
	return &authv1.AuthenticateResponse{Token: rec.Msg.GetToken()}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
