package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

var emcoHeader = http.Header{"Dcm-Dialect": {"emco"}}

// dcmHeader asks for the project's shapes, whatever the gateway's default
// dialect: a gateway speaking EMCO by default answers the status in EMCO's
// shape (docs/emco.md), which has no state.
var dcmHeader = http.Header{"Dcm-Dialect": {"dcm"}}

// lifecycleVerbs are emcoctl anchors that call a verb rather than name a
// collection.
var lifecycleVerbs = map[string]bool{"instantiate": true, "apply": true, "update": true, "stop": true, "terminate": true}

// paths returns a document's collection and item URLs.
func (d *document) paths() (coll, item string, err error) {
	if d.emco {
		coll = "/v2/" + d.anchor
	} else if coll, err = d.kind.collection(d.parents); err != nil {
		return "", "", fmt.Errorf("%s: %w", d.source, err)
	}
	if d.name != "" {
		item = coll + "/" + url.PathEscape(d.name)
	}
	return coll, item, nil
}

func (d *document) header() http.Header {
	if d.emco {
		return emcoHeader
	}
	return nil
}

// verb is the lifecycle verb an emcoctl anchor ends with, if any.
func (d *document) verb() string {
	if !d.emco || d.name != "" {
		return ""
	}
	parts := strings.Split(d.anchor, "/")
	if v := parts[len(parts)-1]; lifecycleVerbs[v] {
		return v
	}
	return ""
}

// current reads the object a document names; nil if there is none.
func current(c *client, d *document) (map[string]any, error) {
	_, item, err := d.paths()
	if err != nil {
		return nil, err
	}
	v, err := c.getJSON(item, d.header())
	if isStatus(err, http.StatusNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.label(), err)
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// create posts a document's object (an emcoctl cluster with a file as
// EMCO's multipart form).
func create(c *client, d *document) error {
	coll, _, err := d.paths()
	if err != nil {
		return err
	}
	body := d.body
	if d.kubeconfig != "" && !d.emco {
		body = withKubeconfig(body, d.kubeconfig)
	}
	if d.emco && d.kubeconfig != "" {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		md, err := json.Marshal(d.body)
		if err != nil {
			return err
		}
		if err := mw.WriteField("metadata", string(md)); err != nil {
			return err
		}
		fw, err := mw.CreateFormFile("file", "kubeconfig")
		if err != nil {
			return err
		}
		if _, err := io.WriteString(fw, d.kubeconfig); err != nil {
			return err
		}
		if err := mw.Close(); err != nil {
			return err
		}
		req, err := c.request("POST", coll, buf.Bytes(), emcoHeader)
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", mw.FormDataContentType())
		_, err = c.send(req)
		return err
	}
	_, err = c.do("POST", coll, body, d.header())
	return err
}

// settledFor reports whether a logical cloud's verb has nothing to do: an
// emcoctl file's instantiate of one already instantiated (or on its way).
func settledFor(c *client, d *document, verb string) (bool, error) {
	if verb != "instantiate" && verb != "apply" {
		return false, nil
	}
	lc := "/v2/" + strings.TrimSuffix(d.anchor, "/"+verb)
	v, err := c.getJSON(lc+"/status", dcmHeader)
	if err != nil {
		return false, err
	}
	s, _ := lookup(v, "state").(string)
	return s == "Instantiating" || s == "Instantiated", nil
}

func applyCmd(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "create or update the resources of YAML files (idempotent: unchanged ones are left alone)",
		Long: `apply reads multi-document YAML files of DCM resources (docs/dcmctl.md) or
emcoctl resource files, and for each object GETs it, compares, and POSTs
(created) or PUTs (configured) it, or leaves it (unchanged). DCM kinds go in
dependency order: Project, ClusterProvider, Cluster, LogicalCloud,
ClusterReference, UserPermission, ClusterQuota, KVPair, TrafficIntentGroup,
its intents. emcoctl files go in their own order. apply stops at the first
error.`,
		Example: `  dcmctl apply -f seed.yaml
  cat seed.yaml | dcmctl apply -f -
  dcmctl apply -f prerequisites.yaml     # an emcoctl file`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := readDocuments(files, cmd.InOrStdin())
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, d := range docs {
				if verb := d.verb(); verb != "" {
					done, err := settledFor(c, d, verb)
					if err != nil {
						return fmt.Errorf("%s: %w", d.label(), err)
					}
					if done {
						say(out, "%s unchanged\n", d.label())
						continue
					}
					if _, err := c.do("POST", "/v2/"+d.anchor, nil, emcoHeader); err != nil {
						return fmt.Errorf("%s: %w", d.label(), err)
					}
					say(out, "%s done\n", d.label())
					continue
				}
				if d.name == "" {
					return fmt.Errorf("%s: no metadata.name", d.source)
				}
				actual, err := current(c, d)
				if err != nil {
					return err
				}
				if actual == nil {
					if err := create(c, d); err != nil {
						return fmt.Errorf("%s: %w", d.label(), err)
					}
					say(out, "%s created\n", d.label())
					continue
				}
				ch, put := plan(d, actual)
				if ch == nil {
					say(out, "%s unchanged\n", d.label())
					continue
				}
				_, item, _ := d.paths()
				if _, err := c.do("PUT", item, put, d.header()); err != nil {
					return fmt.Errorf("%s: %w", d.label(), err)
				}
				say(out, "%s configured\n", d.label())
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file (- for stdin); repeatable")
	return cmd
}

func diffCmd(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "diff -f FILE",
		Short: "show what apply would change (exit 1 if anything would)",
		Example: `  dcmctl diff -f seed.yaml
  # ~ ClusterQuota/quota-1
  #     spec.cpu: "400" -> "200"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := readDocuments(files, cmd.InOrStdin())
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			differs := false
			for _, d := range docs {
				if verb := d.verb(); verb != "" {
					done, err := settledFor(c, d, verb)
					if err != nil && !isStatus(err, http.StatusNotFound) {
						return fmt.Errorf("%s: %w", d.label(), err)
					}
					if !done {
						differs = true
						say(out, "! POST /v2/%s\n", d.anchor)
					}
					continue
				}
				actual, err := current(c, d)
				if err != nil {
					return err
				}
				if actual == nil {
					differs = true
					y, _ := yaml.Marshal(d.body)
					say(out, "+ %s (new)\n%s", d.label(), indent(string(y), "    "))
					continue
				}
				ch, _ := plan(d, actual)
				if ch == nil {
					continue
				}
				differs = true
				say(out, "~ %s\n", d.label())
				for _, x := range ch {
					say(out, "    %s\n", x)
				}
			}
			if differs {
				return exitError{1}
			}
			say(out, "%s\n", "no changes")
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file (- for stdin); repeatable")
	return cmd
}

func indent(s, pre string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pre + l
		}
	}
	return strings.Join(lines, "")
}

// deleteFiles deletes the objects of files in reverse dependency order;
// one already gone is reported, not an error.
func deleteFiles(g *globals, cmd *cobra.Command, files []string) error {
	docs, err := readDocuments(files, cmd.InOrStdin())
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	var failed []string
	for i := len(docs) - 1; i >= 0; i-- {
		d := docs[i]
		if d.name == "" {
			say(out, "%s skipped (not an object)\n", d.label())
			continue
		}
		_, item, err := d.paths()
		if err != nil {
			return err
		}
		_, err = c.do("DELETE", item, nil, d.header())
		switch {
		case isStatus(err, http.StatusNotFound):
			say(out, "%s not found\n", d.label())
		case err != nil:
			say(cmd.ErrOrStderr(), "error: %s: %s\n", d.label(), oneLine(err.Error()))
			failed = append(failed, d.label())
		default:
			say(out, "%s deleted\n", d.label())
		}
	}
	if failed != nil {
		return errors.New("not deleted: " + strings.Join(failed, ", "))
	}
	return nil
}
