package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries an exit code other than 1 (or 0 for a command that
// printed its own verdict).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes dcmctl with args and returns its exit code; every error is
// printed as one line on stderr.
func run(args []string) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	say(os.Stderr, "%s\n", "error: "+oneLine(err.Error()))
	return 1
}

// globals are the flags every command takes.
type globals struct {
	config  string
	context string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "dcmctl",
		Short: "dcmctl drives DCM, the multi-tenant edge-cloud control plane, over its REST API",
		Long: `dcmctl drives DCM over its REST API (the gateway, HTTPS).

Credentials come from the config file (--config, $DCMCTL_CONFIG, or
~/.config/dcm/config.yaml; "dcmctl login" writes it), the context in it
(--context, else its current-context), or, with no config file, the local
"make run" install: $DCM_DATA_DIR/pki (default .dcm/pki) and
https://$DCM_HTTP_ADDR (default 127.0.0.1:8080) with the admin certificate.
$DCMCTL_TOKEN, when set, is the bearer token sent instead of the
context's credential. A credential is sent over https:// only.`,
		Example: `  dcmctl login --server https://dcm.example:8080 --ca ca.crt --token-file token
  dcmctl apply -f seed.yaml
  dcmctl get logical-clouds -p proj1
  dcmctl logical-cloud apply lc-1 -p proj1
  dcmctl logical-cloud status lc-1 -p proj1 --watch
  dcmctl kubeconfig lc-1 cluster-1 -p proj1 -o lc-1.yaml`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.config, "config", "", "config file (default $DCMCTL_CONFIG, else ~/.config/dcm/config.yaml)")
	root.PersistentFlags().StringVar(&g.context, "context", "", "context of the config file to use (default its current-context)")
	root.AddCommand(loginCmd(g), applyCmd(g), diffCmd(g), deleteCmd(g), getCmd(g),
		logicalCloudCmd(g), trafficGroupCmd(g), kubeconfigCmd(g), tokenCmd(g), proxyCmd(g), completionCmd())
	return root
}

func completionCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh",
		Short:     "print a shell completion script",
		Example:   "  source <(dcmctl completion bash)\n  dcmctl completion zsh > \"${fpath[1]}/_dcmctl\"",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh"},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "bash":
				return cmd.Root().GenBashCompletionV2(cmd.OutOrStdout(), true)
			case "zsh":
				return cmd.Root().GenZshCompletion(cmd.OutOrStdout())
			}
			return fmt.Errorf("completion: %q is not bash or zsh", args[0])
		},
	}
}
