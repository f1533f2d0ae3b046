// Command dcm-certs issues the Secrets of the cert-manager Certificates of
// a namespace as cert-manager would, on a cluster with cert-manager's CRDs
// but not its controller (the local clusters of make clusters; package
// certs says why). docs/deploy.md, "On the local clusters".
//
//	go run ./deploy/test/cmd/dcm-certs -kubeconfig .dcm/clusters/cluster-1/kubeconfig -n dcm
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/dcm-project/dcm/deploy/test/certs"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's admin kubeconfig")
	ns := flag.String("n", "dcm", "the namespace of the Issuers and Certificates")
	kubectl := flag.String("kubectl", "kubectl", "the kubectl to run")
	flag.Parse()
	run := func(ctx context.Context, args ...string) (string, error) {
		if *kubeconfig != "" {
			args = append([]string{"--kubeconfig=" + *kubeconfig}, args...)
		}
		cmd := exec.CommandContext(ctx, *kubectl, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return string(out), nil
	}
	names, err := certs.Issue(context.Background(), run, *ns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dcm-certs:", err)
		os.Exit(1)
	}
	for _, n := range names {
		fmt.Println("secret/" + n)
	}
}
