package allinone_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// formPart is one part of a multipart cluster registration.
type formPart struct{ name, content string }

// postForm sends parts as multipart/form-data, the metadata part as
// EMCO's tests send it (a form field) and the file part as emcoctl does
// (a file named "filename"); it returns the status and the body.
func postForm(t *testing.T, c *http.Client, url string, parts ...formPart) (int, string) {
	t.Helper()
	return sendForm(t, c, "POST", url, parts...)
}

// sendForm sends parts as postForm does, with method.
func sendForm(t *testing.T, c *http.Client, method, url string, parts ...formPart) (int, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{"Content-Disposition": {`form-data; name="` + p.name + `"`}}
		if p.name == "file" {
			h = textproto.MIMEHeader{
				"Content-Disposition": {`form-data; name="file"; filename="filename"`},
				"Content-Type":        {"application/octet-stream"},
			}
		}
		w, err := mw.CreatePart(h)
		require.NoError(t, err)
		_, err = io.WriteString(w, p.content)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	req, err := http.NewRequest(method, url, &b)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestMultipartClusterRegistration registers clusters the way EMCO's
// cluster manager takes them (multipart/form-data, a metadata part and a
// file part with the kubeconfig) through the whole program, reads them
// back over the JSON routes, and checks that a bad form stores nothing
// and that the kubeconfig is never answered nor logged.
func TestMultipartClusterRegistration(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	s := stacktest.StartWith(t, stacktest.Options{Logs: logs, Args: []string{"-log-level", "debug"}})
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"emco-provider"}}`)
	const clusters = "/v2/cluster-providers/emco-provider/clusters"

	// Loopback where nothing listens: nothing is reached for.
	kc, key := kubeconfig(t, s.CA, "https://127.0.0.1:1/x")
	sum := sha256.Sum256([]byte(kc))
	fingerprint := "sha256:" + hex.EncodeToString(sum[:])
	secret := strings.TrimSpace(strings.Split(strings.Split(kc, "client-key-data: ")[1], "\n")[0])

	t.Run("registered", func(t *testing.T) {
		r := apitest.NewREST(t, s)
		code, body := postForm(t, s.Admin, s.URL+clusters,
			formPart{"metadata", `{"metadata":{"name":"mp-1","description":"registered by form","userData1":"a","userData2":"b"},"spec":{"labels":["edge","sriov"]}}`},
			formPart{"file", kc})
		require.Equal(t, 201, code, body)
		want := `{"metadata":{"name":"mp-1","description":"registered by form","userData1":"a","userData2":"b"},
			"spec":{"kubeconfig":"","labels":["edge","sriov"],"allow-insecure":false},
			"status":{"server":"https://127.0.0.1:1/x","kubeconfig-fingerprint":"` + fingerprint + `",` + unknownHealth + `}}`
		require.JSONEq(t, want, body)
		r.Is(200, "GET", clusters+"/mp-1", "", want)
		require.Contains(t, r.Want(200, "GET", clusters+"?label=sriov", ""), `"mp-1"`)

		// As emcoctl sends it: metadata only, the file part first.
		code, body = postForm(t, s.Admin, s.URL+clusters, formPart{"file", kc}, formPart{"metadata", `{"metadata":{"name":"mp-2"}}`})
		require.Equal(t, 201, code, body)
		var got struct {
			Spec struct {
				Kubeconfig string   `json:"kubeconfig"`
				Labels     []string `json:"labels"`
			} `json:"spec"`
			Status struct {
				Fingerprint string `json:"kubeconfig-fingerprint"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", clusters+"/mp-2", "")), &got))
		require.Equal(t, []string{}, got.Spec.Labels)
		require.Empty(t, got.Spec.Kubeconfig)
		require.Equal(t, fingerprint, got.Status.Fingerprint)

		code, body = postForm(t, s.Admin, s.URL+clusters, formPart{"metadata", `{"metadata":{"name":"mp-2"}}`}, formPart{"file", kc})
		require.Equal(t, 409, code, body)
	})

	// A bad form is 400 naming the part (or, for what the route's
	// decoder refuses, the field) and stores nothing.
	tooLarge := kc + "# " + strings.Repeat("x", 1<<20) + "\n"
	for _, tc := range []struct {
		name, cluster string
		parts         []formPart
		field, msg    string
	}{
		{name: "metadata not JSON", cluster: "mp-3",
			parts: []formPart{{"metadata", "name: mp-3"}, {"file", kc}}, field: "metadata", msg: "JSON"},
		{name: "metadata without metadata", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"name":"mp-3"}`}, {"file", kc}}, field: "metadata"},
		{name: "unknown key", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp-3","owner":"x"}}`}, {"file", kc}}, field: "owner", msg: "unknown field"},
		{name: "EMCO's gitOps spec", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp-3"},"spec":{"gitOps":{"gitOpsType":"fluxv2"}}}`}, {"file", kc}}, field: "gitOps", msg: "unknown field"},
		{name: "bad label", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp-3"},"spec":{"labels":["-bad-"]}}`}, {"file", kc}}, field: "spec.labels[0]"},
		{name: "bad name", cluster: "",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp_3"}}`}, {"file", kc}}, field: "metadata.name"},
		{name: "not a kubeconfig", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp-3"}}`}, {"file", "just text"}}, field: "file", msg: "kubeconfig"},
		{name: "kubeconfig too large", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp-3"}}`}, {"file", tooLarge}}, field: "file", msg: "exceeds 1048576 bytes"},
		{name: "no file", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp-3"}}`}}, field: "file", msg: "required"},
		{name: "no metadata", cluster: "mp-3",
			parts: []formPart{{"file", kc}}, field: "metadata", msg: "required"},
		{name: "file twice", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp-3"}}`}, {"file", kc}, {"file", kc}}, field: "file", msg: "twice"},
		{name: "unknown part", cluster: "mp-3",
			parts: []formPart{{"metadata", `{"metadata":{"name":"mp-3"}}`}, {"file", kc}, {"labels", "edge"}}, field: "labels", msg: "unknown part"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := postForm(t, s.Admin, s.URL+clusters, tc.parts...)
			require.Equal(t, 400, code, body)
			var e struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			require.Equal(t, tc.field, e.Field, body)
			require.Contains(t, e.Message, tc.msg)
			require.NotContains(t, body, secret)
			r := apitest.NewREST(t, s)
			if tc.cluster != "" {
				r.Want(404, "GET", clusters+"/"+tc.cluster, "")
			}
			var names []string
			for _, c := range decodeClusters(t, r.Want(200, "GET", clusters, "")) {
				names = append(names, c.Metadata.Name)
			}
			require.ElementsMatch(t, []string{"mp-1", "mp-2"}, names, "nothing more is stored")
		})
	}

	// A tenant gets the route's 403, not the form's 400, and nothing is stored.
	pa := s.Issue(t, pki.Identity{Subject: "pa-mp", Role: pki.RoleProjectAdmin, Project: "p1"}, time.Now().Add(time.Hour))
	tenant := s.Client(&pa)
	for _, parts := range [][]formPart{
		{{"metadata", `{"metadata":{"name":"mp-9"}}`}, {"file", kc}},
		{{"metadata", `not JSON`}},
	} {
		code, body := postForm(t, tenant, s.URL+clusters, parts...)
		require.Equal(t, 403, code, body)
	}
	r.Want(404, "GET", clusters+"/mp-9", "")

	// The kubeconfig's credentials are in no answer and no log line.
	list := r.Want(200, "GET", clusters, "")
	require.Contains(t, list, `"mp-1"`)
	for _, needle := range []string{secret, key} {
		require.NotContains(t, list, needle)
		require.NotContains(t, logs.String(), needle)
	}
}

// decodeClusters reads a cluster list's names.
func decodeClusters(t *testing.T, body string) []struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
} {
	t.Helper()
	var cs []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &cs), body)
	return cs
}

// TestMultipartClusterUpdate updates a cluster the way emcoctl's update
// sends it (PUT .../clusters/{name}, the same multipart form) through the
// whole program: the description, user data and labels are replaced, the
// kubeconfig with the file part's, or kept without one; a bad form or
// kubeconfig changes nothing, and a tenant gets 403.
func TestMultipartClusterUpdate(t *testing.T) {
	t.Parallel()
	s := stacktest.StartWith(t, stacktest.Options{})
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"emco-provider"}}`)
	const clusters = "/v2/cluster-providers/emco-provider/clusters"
	fingerprint := func(kc string) string {
		sum := sha256.Sum256([]byte(kc))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	// Loopback where nothing listens: nothing is reached for.
	kc1, _ := kubeconfig(t, s.CA, "https://127.0.0.1:1/one")
	kc2, _ := kubeconfig(t, s.CA, "https://127.0.0.1:1/two")
	code, body := postForm(t, s.Admin, s.URL+clusters, formPart{"metadata", `{"metadata":{"name":"mp-u"}}`}, formPart{"file", kc1})
	require.Equal(t, 201, code, body)

	// emcoctl's update: metadata and file, PUT to the cluster's URL.
	code, body = sendForm(t, s.Admin, "PUT", s.URL+clusters+"/mp-u",
		formPart{"metadata", `{"metadata":{"name":"mp-u","description":"moved","userData1":"u1"},"spec":{"labels":["edge"]}}`}, formPart{"file", kc2})
	require.Equal(t, 200, code, body)
	updated := `{"metadata":{"name":"mp-u","description":"moved","userData1":"u1","userData2":""},
		"spec":{"kubeconfig":"","labels":["edge"],"allow-insecure":false},
		"status":{"server":"https://127.0.0.1:1/two","kubeconfig-fingerprint":"` + fingerprint(kc2) + `",` + unknownHealth + `}}`
	require.JSONEq(t, updated, body)
	r.Is(200, "GET", clusters+"/mp-u", "", updated)

	// Without a file part the stored kubeconfig stays.
	code, body = sendForm(t, s.Admin, "PUT", s.URL+clusters+"/mp-u", formPart{"metadata", `{"metadata":{"name":"mp-u","description":"again"}}`})
	require.Equal(t, 200, code, body)
	kept := `{"metadata":{"name":"mp-u","description":"again","userData1":"","userData2":""},
		"spec":{"kubeconfig":"","labels":[],"allow-insecure":false},
		"status":{"server":"https://127.0.0.1:1/two","kubeconfig-fingerprint":"` + fingerprint(kc2) + `",` + unknownHealth + `}}`
	require.JSONEq(t, kept, body)

	// Refusals change nothing.
	for _, tc := range []struct {
		name, path string
		parts      []formPart
		code       int
		field      string
	}{
		{name: "not a kubeconfig", path: "/mp-u", parts: []formPart{{"metadata", `{"metadata":{"name":"mp-u"}}`}, {"file", "just text"}}, code: 400, field: "file"},
		{name: "empty file", path: "/mp-u", parts: []formPart{{"metadata", `{"metadata":{"name":"mp-u"}}`}, {"file", ""}}, code: 400, field: "file"},
		{name: "another name", path: "/mp-u", parts: []formPart{{"metadata", `{"metadata":{"name":"mp-v"}}`}, {"file", kc1}}, code: 400, field: "metadata.name"},
		{name: "unknown key", path: "/mp-u", parts: []formPart{{"metadata", `{"metadata":{"name":"mp-u"},"spec":{"gitOps":{}}}`}}, code: 400, field: "gitOps"},
		{name: "no such cluster", path: "/mp-x", parts: []formPart{{"metadata", `{"metadata":{"name":"mp-x"}}`}, {"file", kc1}}, code: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := sendForm(t, s.Admin, "PUT", s.URL+clusters+tc.path, tc.parts...)
			require.Equal(t, tc.code, code, body)
			var e struct {
				Field string `json:"field"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			require.Equal(t, tc.field, e.Field, body)
			apitest.NewREST(t, s).Is(200, "GET", clusters+"/mp-u", "", kept)
		})
	}

	pa := s.Issue(t, pki.Identity{Subject: "pa-mpu", Role: pki.RoleProjectAdmin, Project: "p1"}, time.Now().Add(time.Hour))
	code, body = sendForm(t, s.Client(&pa), "PUT", s.URL+clusters+"/mp-u", formPart{"metadata", `{"metadata":{"name":"mp-u","description":"tenant"}}`})
	require.Equal(t, 403, code, body)
	r.Is(200, "GET", clusters+"/mp-u", "", kept)
}

// unknownHealth is the status fields of a cluster never probed (the test
// stacks probe no cluster), as the EMCO dialect writes them: every field.
const unknownHealth = `"state":"Unknown","since":null,"last-seen":null,"last-error":"","server-version":""`
