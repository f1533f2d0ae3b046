package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// lcStatus is a logical cloud's status as the gateway answers it.
type lcStatus struct {
	Project      string   `json:"project"`
	LogicalCloud string   `json:"logical-cloud"`
	State        string   `json:"state"`
	Stopped      bool     `json:"stopped"`
	Ready        int      `json:"ready"`
	Total        int      `json:"total"`
	LastErrors   []string `json:"last-errors"`
	Clusters     []struct {
		Provider  string `json:"cluster-provider"`
		Name      string `json:"cluster-name"`
		State     string `json:"state"`
		Ready     int    `json:"ready"`
		Total     int    `json:"total"`
		LastError string `json:"last-error"`
	} `json:"clusters"`
	Rollout *lcWave `json:"rollout"`
}

// lcWave is a progressive rollout's wave (status.rollout).
type lcWave struct {
	Strategy struct {
		MaxConcurrency string `json:"max-concurrency"`
		MaxFailures    int    `json:"max-failures"`
		Soak           string `json:"soak"`
	} `json:"strategy"`
	Wave              int      `json:"wave"`
	Admitted          int      `json:"admitted"`
	Total             int      `json:"total"`
	Paused            bool     `json:"paused"`
	Failed            []string `json:"failed"`
	SoakUntil         string   `json:"soak-until"`
	RollbackAvailable bool     `json:"rollback-available"`
}

// line is the wave's summary: "rollout: wave 2, 4 of 6 clusters reached
// (2 at a time, max failures 0, soak 30s); paused: failed sim/c2".
func (w *lcWave) line() string {
	s := fmt.Sprintf("rollout: wave %d, %d of %d clusters reached (%s at a time, max failures %d, soak %s)",
		w.Wave, w.Admitted, w.Total, w.Strategy.MaxConcurrency, w.Strategy.MaxFailures, w.Strategy.Soak)
	if len(w.Failed) > 0 {
		s += "; failed: " + strings.Join(w.Failed, ", ")
	}
	switch {
	case w.Paused:
		s += "; paused: resume or rollback"
	case w.SoakUntil != "":
		s += "; next wave after " + w.SoakUntil
	}
	return s
}

func (s *lcStatus) summary() string {
	stopped := ""
	if s.Stopped {
		stopped = " (stopped)"
	}
	return fmt.Sprintf("%s/%s: %s%s %d/%d", s.Project, s.LogicalCloud, s.State, stopped, s.Ready, s.Total)
}

// lcURL is the URL of rpc (a GET or POST on one logical cloud) for
// logical cloud lc of project, with more of its variables if it has them.
func lcURL(method, rpc, project, lc string, more map[string]string) (string, error) {
	if project == "" {
		return "", fmt.Errorf("give the project with -p")
	}
	vals := map[string]string{"project": project, "logical_cloud": lc}
	for k, v := range more {
		vals[k] = v
	}
	return routeURL(method, rpc, vals)
}

func logicalCloudCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "logical-cloud",
		Aliases: []string{"lc"},
		Short:   "a logical cloud's lifecycle: apply, update, stop, resume, rollback, terminate, status",
	}
	for _, verb := range []string{"apply", "update", "stop", "resume", "rollback", "terminate"} {
		cmd.AddCommand(lcVerbCmd(g, verb))
	}
	cmd.AddCommand(lcStatusCmd(g))
	return cmd
}

func lcVerbCmd(g *globals, verb string) *cobra.Command {
	var project, output string
	var force bool
	cmd := &cobra.Command{
		Use:     verb + " LOGICAL-CLOUD -p PROJECT",
		Short:   "POST .../" + verb + " (202: the work goes on; follow it with status --watch)",
		Example: fmt.Sprintf("  dcmctl logical-cloud %s lc-1 -p proj1\n  dcmctl logical-cloud status lc-1 -p proj1 --watch", verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := lcURL("POST", lcVerbs[verb], project, args[0], nil)
			if err != nil {
				return err
			}
			return postVerb(g, cmd.OutOrStdout(), verb, path, nil, force, output, &lcStatus{})
		},
	}
	cmd.Flags().StringVarP(&project, "project", "p", "", "project")
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json: the whole status")
	if verb == "terminate" {
		cmd.Flags().BoolVar(&force, "force", false, "end the terminate for clusters that are gone")
	}
	return cmd
}

// postVerb POSTs a lifecycle verb to path (?force=true when force) and
// prints the status it answers: whole with output (-o), else the summary
// line of st, which it is read into.
func postVerb(g *globals, out io.Writer, verb, path string, header http.Header, force bool, output string,
	st interface{ summary() string }) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if force {
		path += "?force=true"
	}
	b, err := c.do("POST", path, nil, header)
	if err != nil {
		return err
	}
	if output != "" {
		return printJSON(out, output, b)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	say(out, "%s\n", st.summary())
	return nil
}

// printJSON prints the JSON answer b as output (yaml or json) says.
func printJSON(out io.Writer, output string, b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return printValue(out, output, v)
}

func lcStatusCmd(g *globals) *cobra.Command {
	var project, output string
	var watch bool
	cmd := &cobra.Command{
		Use:   "status LOGICAL-CLOUD -p PROJECT [--watch]",
		Short: "a logical cloud's rollout per cluster; --watch follows it until it settles",
		Long: `status shows the logical cloud's state and, per cluster, ready/total
resources, the cluster's state and its last error. With --watch it follows the
rollout (GET .../status?watch=true) until it settles: on a terminal the view is
redrawn in place, with a bar per cluster; otherwise each change is printed as
plain lines. The exit code of --watch says how it ended: 0 Instantiated or
Terminated, 1 a failed state (InstantiateFailed, TerminateFailed) or a watch
that ended unsettled.`,
		Example: `  dcmctl logical-cloud status lc-1 -p proj1
  dcmctl logical-cloud status lc-1 -p proj1 --watch && echo ready
  dcmctl logical-cloud status lc-1 -p proj1 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := lcURL("GET", rpcLCStatus, project, args[0], nil)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !watch {
				v, err := c.getJSON(st, nil)
				if err != nil {
					return err
				}
				if output != "" {
					return printValue(out, output, v)
				}
				b, _ := json.Marshal(v)
				var st lcStatus
				if err := json.Unmarshal(b, &st); err != nil {
					return err
				}
				say(out, "%s", render(&st, false))
				return nil
			}
			tty := false
			if f, ok := out.(*os.File); ok {
				tty = term.IsTerminal(int(f.Fd()))
			}
			return watchStatus(c, st, out, tty)
		},
	}
	cmd.Flags().StringVarP(&project, "project", "p", "", "project")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the rollout until it settles")
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json (without --watch)")
	return cmd
}

// bar is a progress bar of width cells for ready of total.
func bar(ready, total, width int) string {
	n := 0
	if total > 0 {
		n = ready * width / total
	}
	if n > width {
		n = width
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}

// render is the view of a status: a summary line, then a line per cluster
// (with a bar on a terminal) and its last error.
func render(s *lcStatus, tty bool) string {
	return s.summary() + "\n" + renderBody(s, tty)
}

// renderBody is a status's view under its summary line: the rollout wave
// and a line per cluster (a logical cloud's and a traffic group's alike).
func renderBody(s *lcStatus, tty bool) string {
	var b strings.Builder
	if s.Rollout != nil && s.Rollout.Total > 0 {
		b.WriteString(s.Rollout.line() + "\n")
	}
	width := 0
	for _, c := range s.Clusters {
		width = max(width, len(c.Provider)+1+len(c.Name))
	}
	for _, c := range s.Clusters {
		name := c.Provider + "/" + c.Name
		if tty {
			say(&b, "  %-*s %s %d/%d %s\n", width, name, bar(c.Ready, c.Total, 20), c.Ready, c.Total, c.State)
		} else {
			say(&b, "  %s %d/%d %s\n", name, c.Ready, c.Total, c.State)
		}
		if c.LastError != "" {
			say(&b, "    last error: %s\n", oneLine(c.LastError))
		}
	}
	return b.String()
}

// watchStatus follows GET .../status?watch=true (st is .../status) to its end.
func watchStatus(c *client, st string, out io.Writer, tty bool) error {
	req, err := c.request("GET", st+"?watch=true", nil, nil)
	if err != nil {
		return err
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 400 {
		b := make([]byte, 64<<10)
		n, _ := resp.Body.Read(b)
		return errorOf(resp.StatusCode, b[:n])
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var last lcStatus
	v := &viewer{out: out, tty: tty}
	for sc.Scan() {
		var line struct {
			Result *lcStatus `json:"result"`
			Error  *apiError `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if line.Error != nil {
			line.Error.HTTP = line.Error.Code
			return line.Error
		}
		if line.Result == nil {
			continue
		}
		last = *line.Result
		v.show(render(&last, tty))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	return outcome(out, last.LogicalCloud, last.State, "Instantiated")
}

// viewer shows the successive views of a watched status: on a terminal
// each is drawn over the one before, otherwise a view is printed when it
// changed.
type viewer struct {
	out   io.Writer
	tty   bool
	drawn int
	prev  string
}

func (v *viewer) show(view string) {
	switch {
	case v.tty:
		if v.drawn > 0 {
			say(v.out, "\x1b[%dA\x1b[J", v.drawn) // up over the last view, clear to the end
		}
		say(v.out, "%s", view)
		v.drawn = strings.Count(view, "\n")
	case view != v.prev:
		say(v.out, "%s", view)
	}
	v.prev = view
}

// outcome is how a watch of name ended in state: nil when it is ok (the
// applied state of its kind) or Terminated, else a line saying why and
// exit code 1.
func outcome(out io.Writer, name, state, ok string) error {
	switch state {
	case ok, "Terminated":
		return nil
	case "":
		return fmt.Errorf("watch ended without a status")
	}
	if strings.HasSuffix(state, "Failed") {
		say(out, "%s failed\n", name)
	} else if state == "Paused" {
		say(out, "%s paused: too many clusters failed; resume or rollback\n", name)
	} else {
		say(out, "%s did not settle: %s\n", name, state)
	}
	return exitError{1}
}

func kubeconfigCmd(g *globals) *cobra.Command {
	var project, output, user string
	cmd := &cobra.Command{
		Use:   "kubeconfig LOGICAL-CLOUD CLUSTER -p PROJECT [-o FILE]",
		Short: "the logical cloud's user's kubeconfig for one cluster (a file is written 0600)",
		Example: `  dcmctl kubeconfig lc-1 cluster-1 -p proj1 -o lc-1-cluster-1.yaml
  kubectl --kubeconfig lc-1-cluster-1.yaml get configmaps`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := lcURL("GET", rpcKubeconfig, project, args[0], map[string]string{"cluster_name": args[1]})
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if user != "" {
				path += "?user=" + url.QueryEscape(user)
			}
			b, err := c.do("GET", path, nil, nil)
			if err != nil {
				return err
			}
			if output == "" || output == "-" {
				_, err := cmd.OutOrStdout().Write(b)
				return err
			}
			if err := writeSecretFile(output, b); err != nil {
				return err
			}
			say(cmd.OutOrStdout(), "kubeconfig written to %s\n", output)
			return nil
		},
	}
	cmd.Flags().StringVarP(&project, "project", "p", "", "project")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write (mode 0600; default stdout)")
	cmd.Flags().StringVar(&user, "user", "", "another user of a seed 002 logical cloud")
	return cmd
}

func tokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "bearer tokens (admin only): create, list, revoke"}
	var req struct {
		Subject string `json:"subject"`
		Role    string `json:"role"`
		Project string `json:"project,omitempty"`
		TTL     string `json:"ttl,omitempty"`
	}
	var output string
	create := &cobra.Command{
		Use:   "create --subject NAME --role ROLE [--project P] [--ttl 24h]",
		Short: "mint a token (printed this once)",
		Example: `  dcmctl token create --subject alice --role project-admin --project proj1 --ttl 24h
  dcmctl token create --subject alice --role reader | dcmctl login --context alice --server https://127.0.0.1:8080 --ca .dcm/pki/ca.crt --token-file -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			path, err := routeURL("POST", rpcCreateToken, nil)
			if err != nil {
				return err
			}
			b, err := c.do("POST", path, req, nil)
			if err != nil {
				return err
			}
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			if output != "" {
				return printValue(cmd.OutOrStdout(), output, v)
			}
			say(cmd.OutOrStdout(), "%s\n", v["token"])
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&req.Subject, "subject", "", "who the token is for")
	f.StringVar(&req.Role, "role", "", "admin, project-admin or reader")
	f.StringVar(&req.Project, "project", "", "project (project-admin, reader)")
	f.StringVar(&req.TTL, "ttl", "", "lifetime, e.g. 24h (default 30 days)")
	f.StringVarP(&output, "output", "o", "", "yaml or json: the token and its info")
	var listOut string
	list := &cobra.Command{
		Use:     "list",
		Short:   "list tokens (never their secrets)",
		Example: "  dcmctl token list\n  dcmctl token list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			path, err := routeURL("GET", rpcListTokens, nil)
			if err != nil {
				return err
			}
			items, err := c.list(path, "", nil)
			if err != nil {
				return err
			}
			if listOut != "table" {
				return printValue(cmd.OutOrStdout(), listOut, items)
			}
			return printTable(cmd.OutOrStdout(), &kind{NameKeys: []string{"id"}, Columns: [][2]string{
				{"SUBJECT", "subject"}, {"ROLE", "role"}, {"PROJECT", "project"}, {"EXPIRES", "expireTime"}}}, items)
		},
	}
	list.Flags().StringVarP(&listOut, "output", "o", "table", "table, yaml or json")
	revoke := &cobra.Command{
		Use:     "revoke ID",
		Short:   "revoke a token",
		Example: "  dcmctl token revoke 44af644c2632183e",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			path, err := routeURL("DELETE", rpcDeleteToken, map[string]string{"id": args[0]})
			if err != nil {
				return err
			}
			if _, err := c.do("DELETE", path, nil, nil); err != nil {
				return err
			}
			say(cmd.OutOrStdout(), "token %s revoked\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
