package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// document is one YAML document of a file given to apply, diff or delete:
// a DCM resource ({kind, parents..., body or the body's keys}) or an
// emcoctl resource ({version: emco/v2, resourceContext: {anchor}, metadata,
// spec, file}).
type document struct {
	source string // file:index, for messages
	kind   *kind
	rank   int
	// parents are the values of the kind's parent keys.
	parents map[string]string
	body    map[string]any
	name    string
	// kubeconfig is a Cluster's kubeconfigFile (or an emcoctl cluster's
	// file), read.
	kubeconfig string

	emco   bool
	anchor string
}

// label is how a document is named in output: Kind/name or the anchor.
func (d *document) label() string {
	if d.emco {
		if d.name == "" {
			return d.anchor
		}
		return d.anchor + "/" + d.name
	}
	return d.kind.Name + "/" + d.name
}

// readDocuments reads every file (- is stdin) and returns its documents,
// in dependency order unless an emcoctl document is among them (emcoctl
// files are applied in their own order, as emcoctl does).
func readDocuments(files []string, stdin io.Reader) ([]*document, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("no file: give -f FILE (or -f - for stdin)")
	}
	var docs []*document
	for _, f := range files {
		var data []byte
		var err error
		dir := "."
		if f == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(f)
			dir = filepath.Dir(f)
		}
		if err != nil {
			return nil, err
		}
		for i, raw := range splitYAML(data) {
			d, err := parseDocument(raw, dir, fmt.Sprintf("%s#%d", f, i+1))
			if err != nil {
				return nil, err
			}
			if d != nil {
				docs = append(docs, d)
			}
		}
	}
	for _, d := range docs {
		if d.emco {
			return docs, nil
		}
	}
	sort.SliceStable(docs, func(i, j int) bool { return docs[i].rank < docs[j].rank })
	return docs, nil
}

// splitYAML splits a multi-document YAML stream at its "---" lines.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " \t") == "---" || strings.HasPrefix(line, "--- ") {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	return append(docs, cur.Bytes())
}

// parseDocument reads one document; an empty one (comments only) is nil.
func parseDocument(raw []byte, dir, source string) (*document, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, fmt.Errorf("%s: not a YAML object: %w", source, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	if _, ok := m["resourceContext"]; ok {
		return parseEMCO(m, dir, source)
	}
	kindName, _ := m["kind"].(string)
	if kindName == "" {
		return nil, fmt.Errorf("%s: no kind (nor an emcoctl resourceContext)", source)
	}
	k, rank, err := kindNamed(kindName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	delete(m, "kind")
	d := &document{source: source, kind: k, rank: rank, parents: map[string]string{}}
	for _, p := range k.Parents {
		v, ok := m[p].(string)
		if !ok || v == "" {
			return nil, fmt.Errorf("%s: %s needs %q (its parent)", source, k.Name, p)
		}
		d.parents[p] = v
		delete(m, p)
	}
	if k.Name == "Cluster" {
		if f, ok := m["kubeconfigFile"].(string); ok {
			kc, err := readUnder(dir, f)
			if err != nil {
				return nil, fmt.Errorf("%s: kubeconfigFile: %w", source, err)
			}
			d.kubeconfig = string(kc)
			delete(m, "kubeconfigFile")
		}
	}
	if b, ok := m["body"]; ok {
		delete(m, "body")
		if len(m) > 0 {
			return nil, fmt.Errorf("%s: with body:, the document holds only kind and %s's parents (%s)", source, k.Name, strings.Join(keys(m), ", "))
		}
		bm, ok := b.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: body is not an object", source)
		}
		m = bm
	}
	d.body = m
	if d.name = k.nameOf(m); d.name == "" {
		return nil, fmt.Errorf("%s: %s has no name (%s)", source, k.Name, strings.Join(k.NameKeys, " or "))
	}
	return d, nil
}

// parseEMCO reads an emcoctl resource document.
func parseEMCO(m map[string]any, dir, source string) (*document, error) {
	if v, _ := m["version"].(string); v != "emco/v2" {
		return nil, fmt.Errorf("%s: emcoctl document of version %q: only emco/v2 is read", source, v)
	}
	anchor, _ := lookup(m, "resourceContext.anchor").(string)
	anchor = strings.Trim(anchor, "/")
	if anchor == "" {
		return nil, fmt.Errorf("%s: resourceContext.anchor is empty", source)
	}
	d := &document{source: source, emco: true, anchor: anchor, body: map[string]any{}}
	for key, v := range m {
		switch key {
		case "version", "resourceContext":
		case "metadata", "spec":
			d.body[key] = v
		case "file":
			f, _ := v.(string)
			kc, err := readUnder(dir, strings.TrimSpace(f))
			if err != nil {
				return nil, fmt.Errorf("%s: file: %w", source, err)
			}
			d.kubeconfig = string(kc)
		default:
			return nil, fmt.Errorf("%s: unknown key %q in an emcoctl document", source, key)
		}
	}
	d.name, _ = lookup(d.body, "metadata.name").(string)
	return d, nil
}

// readUnder reads p, a file a document names (kubeconfigFile, an emcoctl
// document's file), relative to dir, the document's directory (the
// working directory for a document read from stdin), and refuses a path
// that leaves dir: an absolute one, one with "..", or one whose symbolic
// links, resolved, lead out of dir. A document applied from elsewhere must
// not make dcmctl send one of the operator's files (~/.kube/config, a key)
// to the server.
func readUnder(dir, p string) ([]byte, error) {
	if dir == "" {
		dir = "."
	}
	if p == "" {
		return nil, errors.New("is empty: a file under the document's directory")
	}
	if !filepath.IsLocal(p) {
		return nil, fmt.Errorf("%q is not under the document's directory %s (absolute, or with ..): give a path relative to it", p, dir)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(dir, p))
	if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(realDir, real); err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%q leads out of the document's directory %s through a symbolic link", p, dir)
	}
	return os.ReadFile(real)
}

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
