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
// every program's certificate names it (the allow-lists' identity), the
// gateway serves HTTPS with a certificate of server use only, each program
// with a store gets its own keys and database user as files, and the
// manifests parse as Kubernetes objects. Every Deployment runs two or more
// replicas and has a PodDisruptionBudget selecting its pods that keeps one
// of them up.
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
	tlsSecrets, certSecrets := map[string]bool{}, map[string]bool{}
	type cert struct {
		CommonName string `json:"commonName"`
		Subject    struct {
			Organizations []string `json:"organizations"`
		} `json:"subject"`
		Usages []string `json:"usages"`
	}
	certs := map[string]cert{}           // by secret
	programSecret := map[string]string{} // program -> its tls secret
	httpsSecret := map[string]string{}   // program -> its https secret
	config := map[string]string{}
	type selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	replicas := map[string]int{}                // Deployment -> replicas
	podLabels := map[string]map[string]string{} // Deployment -> its pods' labels
	budgets := map[string]selector{}            // PodDisruptionBudget -> its selector
	keeps := map[string]bool{}                  // PodDisruptionBudget -> keeps a pod up
	for _, f := range kust.Resources {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err, f)
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var obj struct {
				Kind     string                `json:"kind"`
				Metadata struct{ Name string } `json:"metadata"`
				Data     map[string]string     `json:"data"`
				Spec     struct {
					SecretName string `json:"secretName"`
					cert
					Replicas       *int     `json:"replicas"`
					Selector       selector `json:"selector"`
					MinAvailable   any      `json:"minAvailable"`
					MaxUnavailable any      `json:"maxUnavailable"`
					Template       struct {
						Metadata struct {
							Labels map[string]string `json:"labels"`
						} `json:"metadata"`
						Spec struct {
							Containers []struct {
								Command []string `json:"command"`
								Env     []struct {
									Name string `json:"name"`
								} `json:"env"`
								VolumeMounts []struct {
									Name      string `json:"name"`
									MountPath string `json:"mountPath"`
								} `json:"volumeMounts"`
							} `json:"containers"`
							Volumes []struct {
								Name   string `json:"name"`
								Secret struct {
									SecretName string `json:"secretName"`
								} `json:"secret"`
							} `json:"volumes"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			require.NoError(t, yaml.Unmarshal(doc, &obj), f)
			require.NotEmpty(t, obj.Kind, f)
			switch obj.Kind {
			case "Deployment":
				require.NotNil(t, obj.Spec.Replicas, "%s sets its replicas", obj.Metadata.Name)
				replicas[obj.Metadata.Name] = *obj.Spec.Replicas
				podLabels[obj.Metadata.Name] = obj.Spec.Template.Metadata.Labels
				for _, c := range obj.Spec.Template.Spec.Containers {
					name := filepath.Base(c.Command[0])
					commands[name] = true
					mounts := map[string]string{}
					for _, m := range c.VolumeMounts {
						mounts[m.Name] = m.MountPath
					}
					require.Equal(t, "/etc/dcm/tls", mounts["tls"], "%s mounts its certificate", name)
					secretsOf := map[string]string{}
					for _, v := range obj.Spec.Template.Spec.Volumes {
						secretsOf[v.Name] = v.Secret.SecretName
					}
					tlsSecrets[secretsOf["tls"]] = true
					for _, e := range c.Env {
						require.NotContains(t, []string{"DCM_MONGO_URI", "DCM_KEK"}, e.Name, "%s: secrets come as files", name)
					}
					if name != "gateway" {
						require.Equal(t, "/etc/dcm/kek", mounts["kek"], name)
						require.Equal(t, "dcm-kek-"+name, secretsOf["kek"], "%s holds its own keys only", name)
						require.Equal(t, "/etc/dcm/mongo", mounts["mongo"], name)
						require.Equal(t, "dcm-mongo-"+name, secretsOf["mongo"], "%s has its own database user", name)
					}
					programSecret[name] = secretsOf["tls"]
					if mounts["https"] != "" {
						tlsSecrets[secretsOf["https"]] = true
						httpsSecret[name] = secretsOf["https"]
					}
				}
			case "Certificate":
				certSecrets[obj.Spec.SecretName] = true
				certs[obj.Spec.SecretName] = obj.Spec.cert
			case "ConfigMap":
				config = obj.Data
			case "PodDisruptionBudget":
				budgets[obj.Metadata.Name] = obj.Spec.Selector
				keeps[obj.Metadata.Name] = (obj.Spec.MinAvailable != nil && obj.Spec.MinAvailable != float64(0) && obj.Spec.MinAvailable != "0%") ||
					(obj.Spec.MaxUnavailable != nil && obj.Spec.MaxUnavailable != float64(0) && obj.Spec.MaxUnavailable != "0%")
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
	for program, secret := range programSecret {
		c := certs[secret]
		require.Equal(t, program, c.CommonName, "%s's certificate names it", program)
		require.Equal(t, []string{"service"}, c.Subject.Organizations, program)
	}
	https := certs[httpsSecret["gateway"]]
	require.NotEmpty(t, https.Usages, "the gateway serves HTTPS with a certificate of its own")
	require.NotContains(t, https.Usages, "client auth")
	require.Empty(t, https.Subject.Organizations)
	require.Equal(t, certSecrets, tlsSecrets, "every mounted certificate is issued, and every issued one mounted")
	for _, k := range []string{"DCM_TLS_CA_FILE", "DCM_TLS_CERT_FILE", "DCM_TLS_KEY_FILE", "DCM_KEK_FILE", "DCM_MONGO_URI_FILE"} {
		require.True(t, strings.HasPrefix(config[k], "/etc/dcm/"), k)
	}

	// Replicas, and a disruption budget selecting each Deployment's pods
	// (and no other's) that keeps one of them up: core and the stateless
	// services 2, rsync 3 (docs/lifecycle.md and docs/rsync.md, "Replicas").
	require.Len(t, replicas, 9, "the eight services and the gateway")
	for deployment, n := range replicas {
		require.GreaterOrEqual(t, n, 2, "%s runs replicas", deployment)
		var selecting []string
		for pdb, sel := range budgets {
			if len(sel.MatchLabels) == 0 {
				continue
			}
			matches := true
			for k, v := range sel.MatchLabels {
				matches = matches && podLabels[deployment][k] == v
			}
			if matches {
				selecting = append(selecting, pdb)
				require.True(t, keeps[pdb], "%s keeps a pod of %s up (minAvailable or maxUnavailable above 0)", pdb, deployment)
			}
		}
		require.Len(t, selecting, 1, "one PodDisruptionBudget selects %s's pods", deployment)
	}
	require.Equal(t, 3, replicas["dcm-rsync"])
	require.Len(t, budgets, len(replicas), "a budget per Deployment, none for nothing")
}
