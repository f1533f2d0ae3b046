package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/dcm-project/dcm/platform/errs"
)

// Title is the served document's info.title.
const Title = "DCM REST API"

// SecurityScheme is the name of the document's one security definition.
const SecurityScheme = "bearer"

// PageTokenHeader is the header a collection GET carries the next page's
// token in (the gateway's NextPageTokenHeader; docs/conventions.md).
const PageTokenHeader = "Next-Page-Token"

// ErrorDefinition is the name of the error body's schema in definitions.
const ErrorDefinition = "Error"

const description = `The REST API of DCM, the distributed cloud manager: projects, cluster providers and
clusters, logical clouds and what they hold, their lifecycle and status, the traffic controller's
intents, the CA distribution and the service mesh.

**Authentication.** Every call takes a bearer token (` + "`Authorization: Bearer <token>`" + `: the
bootstrap admin token, or one issued by ` + "`POST /v2/auth/tokens`" + `) or, instead, a client
certificate of DCM's CA over mutual TLS. What a caller may do follows its role (admin,
project-admin, reader; docs/security.md). This document and the page showing it (` + "`/docs`" + `)
need no credential.

**Status codes.** A successful call answers 201 Created for a Create call, 204 No Content (no
body) for a Delete call, 202 Accepted for the asynchronous lifecycle calls (apply, stop,
terminate, update: the body is the status as the call left it, read ` + "`.../status`" + ` for
the rest), and 200 for every other call. Every error carries the same JSON body (` + "`Error`" + `):
the HTTP status, the gRPC status name, a message, the request field at fault and, for the
conflicts a client reacts to differently, a reason.

**Collections.** Collection GETs are paged: ` + "`page-size`" + ` (default 100, at most 1000) and
` + "`page-token`" + `; the next page's token is in the ` + "`" + PageTokenHeader + "`" + ` header,
absent on the last page.

**Dialects.** The same URLs also speak the dialect of EMCO's DCM API, for clients moving from it:
see docs/emco.md. This document describes the project's own dialect.`

// Build returns the document the gateway serves: the generated one with a
// real title and version, the security definition, the success status that
// status (the gateway's rule, by RPC method name) gives each operation,
// and the error responses with platform/errs' body. It fails if the
// generated document is not what it expects (an operation it cannot name).
func Build(status func(rpc string) int, version string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(Document))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("read the generated document: %w", err)
	}
	doc["info"] = map[string]any{"title": Title, "version": version, "description": description}
	doc["securityDefinitions"] = map[string]any{SecurityScheme: map[string]any{
		"type": "apiKey", "in": "header", "name": "Authorization",
		"description": "`Authorization: Bearer <token>`: the bootstrap admin token (dcm-admin-...) or a token " +
			"issued by POST /v2/auth/tokens. A client certificate of DCM's CA, presented over mutual TLS, " +
			"is accepted instead of a token (the certificate's organization is its role). " +
			"A client whose address failed to authenticate too often is refused with 429 for a while.",
	}}
	doc["security"] = []any{map[string]any{SecurityScheme: []any{}}}
	defs, _ := doc["definitions"].(map[string]any)
	if defs == nil {
		return nil, fmt.Errorf("the generated document has no definitions")
	}
	if _, ok := defs[ErrorDefinition]; ok {
		return nil, fmt.Errorf("the generated document already defines %q", ErrorDefinition)
	}
	schema, err := errorSchema()
	if err != nil {
		return nil, err
	}
	defs[ErrorDefinition] = schema
	doc["responses"] = errorResponses()
	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		return nil, fmt.Errorf("the generated document has no paths")
	}
	for path, item := range paths {
		ops, _ := item.(map[string]any)
		for verb, o := range ops {
			op, _ := o.(map[string]any)
			if op == nil {
				return nil, fmt.Errorf("%s %s: not an operation", verb, path)
			}
			if err := operation(op, verb, path, status); err != nil {
				return nil, fmt.Errorf("%s %s: %w", strings.ToUpper(verb), path, err)
			}
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}

// RPC is the method name of the RPC an operation calls, from its
// operationId ("LogicalCloudService_ApplyLogicalCloud", numbered
// "..._ApplyTrafficIntentGroup3" for a route's second and later bindings).
func RPC(operationID string) (string, error) {
	_, m, ok := strings.Cut(operationID, "_")
	m = strings.TrimRight(m, "0123456789")
	if !ok || m == "" {
		return "", fmt.Errorf("operationId %q does not name an RPC (Service_Method)", operationID)
	}
	return m, nil
}

// operation rewrites one operation's responses: the generated 200 becomes
// the status the gateway answers, and the errors it may answer are added.
func operation(op map[string]any, verb, path string, status func(string) int) error {
	id, _ := op["operationId"].(string)
	rpc, err := RPC(id)
	if err != nil {
		return err
	}
	resps, _ := op["responses"].(map[string]any)
	ok, _ := resps["200"].(map[string]any)
	if ok == nil {
		return fmt.Errorf("%s has no generated 200 response", id)
	}
	delete(resps, "200")
	code := status(rpc)
	switch code {
	case http.StatusNoContent:
		ok = map[string]any{"description": "No Content: done; the answer has no body."}
	case http.StatusAccepted:
		ok["description"] = "Accepted: the work goes on after the answer; the body is the status as the call left it " +
			"(read .../status for the rest). " + fmt.Sprint(ok["description"])
	}
	if paged(op) {
		ok["headers"] = map[string]any{PageTokenHeader: map[string]any{
			"type": "string", "description": "The next page's page-token; absent on the last page.",
		}}
	}
	resps[strconv.Itoa(code)] = ok
	for _, c := range errorCodes(op, verb, path) {
		resps[c] = map[string]any{"$ref": "#/responses/" + c}
	}
	if streaming(ok) {
		streamLines(ok)
		op["description"] = strings.TrimSpace(fmt.Sprint(op["description"]) + "\n\n" + streamNote)
	}
	resps["default"] = map[string]any{"$ref": "#/responses/default"}
	return nil
}

// streaming reports whether a generated success response is a stream
// (a server-streaming RPC: protoc-gen-openapiv2 titles its schema so).
func streaming(ok map[string]any) bool {
	schema, _ := ok["schema"].(map[string]any)
	title, _ := schema["title"].(string)
	return strings.HasPrefix(title, "Stream result of")
}

// streamNote says how a streaming call's errors come: before the stream
// began, as every call's (the gateway's watchWriter); after, in it.
const streamNote = "Errors before the stream began come as every call's, with the status and `Error` body listed. " +
	"Once the 200 stream began, an error ends it with a last line `{\"error\": {\"code\": <gRPC code number>, " +
	"\"message\", \"details\"}}` (grpc-gateway's stream shape: a google.rpc.Status)."

// streamLines adds, to a streaming 200's line schema ({"result": ...}),
// the error line that may end the stream.
func streamLines(ok map[string]any) {
	schema, _ := ok["schema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		return
	}
	props["error"] = map[string]any{
		"type":        "object",
		"description": "The error that ended the stream after it began (a google.rpc.Status); the stream's last line.",
		"properties": map[string]any{
			"code":    map[string]any{"type": "integer", "format": "int32", "description": "The gRPC status code number (5: NotFound)."},
			"message": map[string]any{"type": "string"},
			"details": map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
		},
	}
}

// paged reports whether op is a collection GET that takes a page-token.
func paged(op map[string]any) bool {
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		if m, _ := p.(map[string]any); m["in"] == "query" && m["name"] == "page-token" {
			return true
		}
	}
	return false
}

// hasBody reports whether op takes a request body.
func hasBody(op map[string]any) bool {
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		if m, _ := p.(map[string]any); m["in"] == "body" {
			return true
		}
	}
	return false
}

// errorCodes are the error statuses op is documented with (others come
// under "default"): every call may be refused 400 (a bad parameter, an
// encoded "/" in the path), 401, 403, 429 (the failed-authentication
// limiter) and 503 (a service down); one with a path parameter names a
// record that may not exist (404); a write may conflict (409), as may a
// read whose contract says so; a call with a body may send too much (413).
func errorCodes(op map[string]any, verb, path string) []string {
	codes := []string{"400", "401", "403"}
	if strings.Contains(path, "{") {
		codes = append(codes, "404")
	}
	text := fmt.Sprint(op["summary"], " ", op["description"])
	if verb != "get" || strings.Contains(text, "409") {
		codes = append(codes, "409")
	}
	if hasBody(op) {
		codes = append(codes, "413")
	}
	return append(codes, "429", "503")
}

// errorResponses are the shared responses the operations refer to.
func errorResponses() map[string]any {
	ref := map[string]any{"$ref": "#/definitions/" + ErrorDefinition}
	r := func(desc string) map[string]any { return map[string]any{"description": desc, "schema": ref} }
	unauth := r("Unauthenticated: no credential, or one that is not valid (status `Unauthenticated`).")
	unauth["headers"] = map[string]any{"WWW-Authenticate": map[string]any{"type": "string", "description": `Bearer realm="dcm"`}}
	limited := r("Too Many Requests (status `ResourceExhausted`): the client's address failed to authenticate too often " +
		"(DCM_AUTH_FAILURE_BURST), or a limit was reached (open watches).")
	limited["headers"] = map[string]any{"Retry-After": map[string]any{"type": "integer", "description": "Seconds to wait before trying again."}}
	return map[string]any{
		"400": r("Bad Request (status `InvalidArgument`): `field` names what is wrong, as the request spelled it " +
			"(a body key such as `metadata.name`, a query parameter, `path` or `body`)."),
		"401": unauth,
		"403": r("Forbidden (status `PermissionDenied`): the caller's role does not allow the call, " +
			"or the service refused part of it (`field` names which)."),
		"404": r("Not Found (status `NotFound`): the record, or one it is under, does not exist."),
		"409": r("Conflict: it exists already (`AlreadyExists`), its state forbids the call " +
			"(`FailedPrecondition`; `reason` says why: WRONG_STATE, STILL_DELETING, REFERENCED, ...), " +
			"or it changed since it was read (`Aborted`, reason CONCURRENT_UPDATE: read again and retry)."),
		"413":     r("Request Entity Too Large (status `ResourceExhausted`): the body exceeds DCM_MAX_BODY_BYTES."),
		"429":     limited,
		"503":     r("Service Unavailable (status `Unavailable`): a service or a check it needs cannot be reached now; retry later."),
		"default": r("Any other error, in the same body: 500 Internal, 504 a deadline exceeded, 501 not implemented."),
	}
}

// errorFields describe the error body's fields, by JSON name; every field
// of errs.Body must have one (errorSchema fails otherwise).
var errorFields = map[string]string{
	"code":    "The HTTP status code, as in the status line.",
	"status":  "The gRPC status name (`InvalidArgument`, `NotFound`, `AlreadyExists`, `FailedPrecondition`, ...).",
	"message": "What went wrong, for people; clients branch on status, field and reason, never on the message.",
	"field":   "The request field at fault, as the request spelled it (`metadata.name`, `page-size`, `path`, `body`).",
	"reason": "Why a conflict happened, for the conflicts a client reacts to differently: " +
		strings.Join(reasonNames(), ", ") + ".",
}

// errorSchema is the schema of errs.Body, the one error body the gateway
// writes (errs.WriteHTTPStatus), read from the type: its JSON names, and
// omitempty fields are optional.
func errorSchema() (map[string]any, error) {
	t := reflect.TypeFor[errs.Body]()
	props := map[string]any{}
	var required []any
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			return nil, fmt.Errorf("errs.Body.%s has no JSON name", f.Name)
		}
		desc, ok := errorFields[name]
		if !ok {
			return nil, fmt.Errorf("errs.Body's field %q is not described in the OpenAPI document (openapi.errorFields)", name)
		}
		p := map[string]any{"description": desc}
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int32, reflect.Int64:
			p["type"], p["format"] = "integer", "int32"
		case reflect.String:
			p["type"] = "string"
		default:
			return nil, fmt.Errorf("errs.Body.%s: type %s has no OpenAPI type here", f.Name, f.Type)
		}
		if name == "reason" {
			p["enum"] = toAny(reasonNames())
		}
		props[name] = p
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	if len(props) != len(errorFields) {
		return nil, fmt.Errorf("openapi.errorFields describes fields errs.Body does not have")
	}
	return map[string]any{
		"type":        "object",
		"description": "The body of every error answer (platform/errs).",
		"properties":  props,
		"required":    required,
	}, nil
}

// Reasons are the conflict reasons of platform/errs (its Reason constants;
// TestReasonsComplete checks none is missing).
var Reasons = []errs.Reason{
	errs.ReasonWrongState, errs.ReasonStillDeleting, errs.ReasonReferenced, errs.ReasonOwnedByOther,
	errs.ReasonNotManaged, errs.ReasonConcurrentUpdate, errs.ReasonNotIssued, errs.ReasonMeshLimit, errs.ReasonLastUser,
}

func reasonNames() []string {
	s := make([]string, len(Reasons))
	for i, r := range Reasons {
		s[i] = string(r)
	}
	return s
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}
