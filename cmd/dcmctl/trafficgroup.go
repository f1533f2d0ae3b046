package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// tgVerbs are traffic-group's verbs and the RPC each calls (POST).
var tgVerbs = map[string]string{
	"apply":     "/dcm.core.v1.TrafficLifecycleService/ApplyTrafficIntentGroup",
	"update":    "/dcm.core.v1.TrafficLifecycleService/UpdateTrafficIntentGroupResources",
	"resume":    "/dcm.core.v1.TrafficLifecycleService/ResumeTrafficIntentGroup",
	"rollback":  "/dcm.core.v1.TrafficLifecycleService/RollbackTrafficIntentGroup",
	"terminate": "/dcm.core.v1.TrafficLifecycleService/TerminateTrafficIntentGroup",
}

const rpcTGStatus = "/dcm.core.v1.TrafficLifecycleService/GetTrafficIntentGroupStatus"

// The group's answers are read in DCM's shape (dcmHeader), whatever the
// project's dialect.

// tgStatus is a traffic intent group's status as the gateway answers it
// (TrafficIntentGroupStatus): a logical cloud's fields (state, ready,
// total, clusters, rollout) and the group's URL.
type tgStatus struct {
	lcStatus
	App     string `json:"rb"`
	Version string `json:"version"`
	Group   string `json:"group"`
}

func (s *tgStatus) summary() string {
	return fmt.Sprintf("%s/%s/%s/%s: %s %d/%d", s.Project, s.App, s.Version, s.Group, s.State, s.Ready, s.Total)
}

func (s *tgStatus) render(tty bool) string {
	return s.summary() + "\n" + renderBody(&s.lcStatus, tty)
}

// tgFlags are the group's URL: project, composite app and version.
type tgFlags struct{ project, app, version string }

func (f *tgFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.project, "project", "p", "", "project")
	fl.StringVar(&f.app, "app", "", "composite app (rb) of the group")
	fl.StringVar(&f.version, "version", "", "version of the composite app")
	// get's names for the same two
	fl.StringVar(&f.app, "composite-app", "", "same as --app")
	fl.StringVar(&f.version, "app-version", "", "same as --version")
	_ = fl.MarkHidden("composite-app")
	_ = fl.MarkHidden("app-version")
}

// url is the URL of rpc (a GET or POST on one traffic intent group).
func (f *tgFlags) url(method, rpc, group string) (string, error) {
	for _, m := range [][2]string{{f.project, "give the project with -p"}, {f.app, "give the composite app with --app"},
		{f.version, "give the composite app's version with --version"}} {
		if m[0] == "" {
			return "", fmt.Errorf("%s", m[1])
		}
	}
	return routeURL(method, rpc, map[string]string{"project": f.project, "composite_app": f.app, "version": f.version, "group": group})
}

func trafficGroupCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "traffic-group",
		Aliases: []string{"tg"},
		Short:   "a traffic intent group's lifecycle: apply, update, resume, rollback, terminate, status",
	}
	for _, verb := range []string{"apply", "update", "resume", "rollback", "terminate"} {
		cmd.AddCommand(tgVerbCmd(g, verb))
	}
	cmd.AddCommand(tgStatusCmd(g))
	return cmd
}

func tgVerbCmd(g *globals, verb string) *cobra.Command {
	var f tgFlags
	var output string
	var force bool
	cmd := &cobra.Command{
		Use:   verb + " GROUP -p PROJECT --app COMPOSITE-APP --version VERSION",
		Short: "POST .../traffic-intent-groups/GROUP/" + verb + " (the work goes on; follow it with status --watch)",
		Example: fmt.Sprintf("  dcmctl traffic-group %s g -p proj1 --app bookinfo --version v1\n"+
			"  dcmctl traffic-group status g -p proj1 --app bookinfo --version v1 --watch", verb),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := f.url("POST", tgVerbs[verb], args[0])
			if err != nil {
				return err
			}
			return postVerb(g, cmd.OutOrStdout(), verb, path, dcmHeader, force, output, &tgStatus{})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json: the whole status")
	if verb == "terminate" {
		cmd.Flags().BoolVar(&force, "force", false, "end the terminate for clusters that are gone")
	}
	return cmd
}

func tgStatusCmd(g *globals) *cobra.Command {
	var f tgFlags
	var output string
	var watch bool
	var interval, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status GROUP -p PROJECT --app COMPOSITE-APP --version VERSION [--watch]",
		Short: "a traffic intent group's state per cluster and its rollout wave; --watch follows it until it settles",
		Long: `status shows the traffic intent group's state, ready/total objects, the
wave of a progressive rollout and, per cluster, ready/total, the cluster's
state and its last error. The core has no watch route for groups: --watch
reads GET .../status every --interval until the group settles or --timeout
passes; on a terminal the view is redrawn in place, with a bar per cluster,
otherwise each change is printed as plain lines. The exit code of --watch
says how it ended: 0 Applied or Terminated, 1 a failed state (ApplyFailed,
TerminateFailed), Paused, Created (never applied), or --timeout passed.`,
		Example: `  dcmctl traffic-group status g -p proj1 --app bookinfo --version v1
  dcmctl traffic-group status g -p proj1 --app bookinfo --version v1 --watch && echo applied
  dcmctl traffic-group status g -p proj1 --app bookinfo --version v1 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := f.url("GET", rpcTGStatus, args[0])
			if err != nil {
				return err
			}
			if watch && interval <= 0 {
				return fmt.Errorf("--interval must be more than 0")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !watch {
				b, err := c.do("GET", st, nil, dcmHeader)
				if err != nil {
					return err
				}
				if output != "" {
					return printJSON(out, output, b)
				}
				var s tgStatus
				if err := json.Unmarshal(b, &s); err != nil {
					return err
				}
				say(out, "%s", s.render(false))
				return nil
			}
			tty := false
			if f, ok := out.(*os.File); ok {
				tty = term.IsTerminal(int(f.Fd()))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return pollGroup(ctx, c, st, interval, out, tty)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the group until it settles")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "with --watch: time between two reads of the status")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "with --watch: give up (exit 1) after this long")
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json (without --watch)")
	return cmd
}

// tgSettled are the states a group stays in until someone acts.
var tgSettled = map[string]bool{"Created": true, "Applied": true, "ApplyFailed": true, "Paused": true,
	"Terminated": true, "TerminateFailed": true}

// pollGroup reads the group's status (st) every interval and shows it
// until the group settles or ctx ends.
func pollGroup(ctx context.Context, c *client, st string, interval time.Duration, out io.Writer, tty bool) error {
	v := &viewer{out: out, tty: tty}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		req, err := c.request("GET", st, nil, dcmHeader)
		if err != nil {
			return err
		}
		b, err := c.send(req.WithContext(ctx))
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			return err
		}
		var s tgStatus
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		v.show(s.render(tty))
		if tgSettled[s.State] {
			if s.State == "Created" {
				say(out, "%s is not applied\n", s.Group)
				return exitError{1}
			}
			return outcome(out, s.Group, s.State, "Applied")
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	say(out, "gave up: the group did not settle in time\n")
	return exitError{1}
}
