package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// parentFlags are the flags that name a kind's parents on the command line.
type parentFlags struct {
	project, logicalCloud, provider, compositeApp, version, group string
}

func (p *parentFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&p.project, "project", "p", "", "project")
	f.StringVarP(&p.logicalCloud, "logical-cloud", "l", "", "logical cloud")
	f.StringVar(&p.provider, "provider", "", "cluster provider (clusters)")
	f.StringVar(&p.compositeApp, "composite-app", "", "composite app of a traffic intent group's URL")
	f.StringVar(&p.version, "app-version", "", "version of a traffic intent group's URL")
	f.StringVar(&p.group, "group", "", "traffic intent group (intents)")
}

func (p *parentFlags) values() map[string]string {
	return map[string]string{"project": p.project, "logicalCloud": p.logicalCloud, "provider": p.provider,
		"compositeApp": p.compositeApp, "version": p.version, "group": p.group}
}

// kindNames completes a kind argument.
func kindNames(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, k := range kinds {
		out = append(out, k.Aliases[0])
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func getCmd(g *globals) *cobra.Command {
	var p parentFlags
	var output, state string
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "list resources of a kind, or show one (table, yaml or json)",
		Example: `  dcmctl get projects
  dcmctl get clusters --provider edge
  dcmctl get clusters --provider edge --state Unreachable
  dcmctl get logical-clouds -p proj1 -o yaml
  dcmctl get cluster-references -p proj1 -l lc-1
  dcmctl get cluster-quota quota-1 -p proj1 -l lc-1 -o json`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: kindNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, _, err := kindNamed(args[0])
			if err != nil {
				return err
			}
			coll, err := k.collection(p.values())
			if err != nil {
				return fmt.Errorf("%w: give it with its flag (dcmctl get --help)", err)
			}
			filter := url.Values{}
			if state != "" {
				if k.Name != "Cluster" || len(args) == 2 {
					return fmt.Errorf("--state filters a list of clusters only")
				}
				filter.Set("state", state)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var items []any
			if len(args) == 2 {
				v, err := c.getJSON(coll+"/"+url.PathEscape(args[1]), nil)
				if err != nil {
					return err
				}
				if output != "table" {
					return printValue(cmd.OutOrStdout(), output, v)
				}
				items = []any{v}
			} else {
				if items, err = c.list(coll, k.Wrapper, filter); err != nil {
					return err
				}
				if output != "table" {
					return printValue(cmd.OutOrStdout(), output, items)
				}
			}
			return printTable(cmd.OutOrStdout(), k, items)
		},
	}
	p.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, yaml or json")
	cmd.Flags().StringVar(&state, "state", "", "clusters whose health is this state: Ready, Unreachable, Unauthorized or Unknown")
	return cmd
}

// printValue prints v as yaml or json.
func printValue(w io.Writer, output string, v any) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("output %q: give table, yaml or json", output)
}

func printTable(w io.Writer, k *kind, items []any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	head := []string{"NAME"}
	if k.NameKeys[0] == "id" {
		head[0] = "ID"
	}
	for _, c := range k.Columns {
		head = append(head, c[0])
	}
	say(tw, "%s\n", strings.Join(head, "\t"))
	for _, it := range items {
		m, _ := it.(map[string]any)
		row := []string{k.nameOf(m)}
		for _, c := range k.Columns {
			row = append(row, cell(lookup(m, c[1])))
		}
		say(tw, "%s\n", strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// cell shows a value in a table: lists joined with commas, objects as
// compact JSON, nothing as <none>.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "<none>"
	case string:
		if x == "" {
			return "<none>"
		}
		return x
	case []any:
		if len(x) == 0 {
			return "<none>"
		}
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = scalarText(e)
		}
		return strings.Join(s, ",")
	}
	return scalarText(v)
}

func deleteCmd(g *globals) *cobra.Command {
	var p parentFlags
	var files []string
	cmd := &cobra.Command{
		Use:   "delete (KIND NAME | -f FILE)",
		Short: "delete a resource, or every resource of YAML files in reverse dependency order",
		Example: `  dcmctl delete cluster-quota quota-1 -p proj1 -l lc-1
  dcmctl delete -f seed.yaml`,
		Args:              cobra.MaximumNArgs(2),
		ValidArgsFunction: kindNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) > 0 {
				if len(args) > 0 {
					return fmt.Errorf("delete: give either -f or KIND NAME")
				}
				return deleteFiles(g, cmd, files)
			}
			if len(args) != 2 {
				return fmt.Errorf("delete: give KIND NAME (or -f FILE)")
			}
			k, _, err := kindNamed(args[0])
			if err != nil {
				return err
			}
			coll, err := k.collection(p.values())
			if err != nil {
				return fmt.Errorf("%w: give it with its flag (dcmctl delete --help)", err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if _, err := c.do("DELETE", coll+"/"+url.PathEscape(args[1]), nil, nil); err != nil {
				return err
			}
			say(cmd.OutOrStdout(), "%s/%s deleted\n", k.Name, args[1])
			return nil
		},
	}
	p.add(cmd)
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file (- for stdin); repeatable")
	return cmd
}

// writeSecretFile writes data to path with mode 0600 (also when the file
// existed with another mode).
func writeSecretFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
