package allinone_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestDeployManifests checks deploy/ against the code: every program has a
// Deployment whose command exists, every service's address is configured,
// and the manifests parse as Kubernetes objects.
func TestDeployManifests(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "deploy")
	var kust struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &kust))

	commands := map[string]bool{}
	config := map[string]string{}
	for _, f := range kust.Resources {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err, f)
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var obj struct {
				Kind string            `json:"kind"`
				Data map[string]string `json:"data"`
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Command []string `json:"command"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			require.NoError(t, yaml.Unmarshal(doc, &obj), f)
			require.NotEmpty(t, obj.Kind, f)
			switch obj.Kind {
			case "Deployment":
				for _, c := range obj.Spec.Template.Spec.Containers {
					commands[filepath.Base(c.Command[0])] = true
				}
			case "ConfigMap":
				config = obj.Data
			}
		}
	}
	for _, svc := range []string{"core", "namespace", "user", "quota", "servicemesh", "cadist", "traffic", "rsync"} {
		require.True(t, commands[svc], "a Deployment runs %s", svc)
		_, err := os.Stat(filepath.Join("..", svc, "cmd", svc, "main.go"))
		require.NoError(t, err, "its command exists")
		require.Equal(t, "dcm-"+svc+":9090", config["DCM_"+strings.ToUpper(svc)+"_ADDR"])
	}
	require.True(t, commands["gateway"])
}
