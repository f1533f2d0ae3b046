package dns

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	apiv1alpha1 "sigs.k8s.io/external-dns/apis/v1alpha1"
	"sigs.k8s.io/external-dns/endpoint"
)

// dnsEndpoints is external-dns's DNSEndpoint resource.
var dnsEndpoints = schema.GroupVersionResource{Group: "externaldns.k8s.io", Version: "v1alpha1", Resource: "dnsendpoints"}

// crdSource reads one cluster's DNSEndpoints (in one namespace, filtered by
// labels) into endpoints, as external-dns's CRD source does. That source
// (package source) is not used: it links every source external-dns has,
// some of whose modules the module proxy does not serve. This one lists
// once per pass rather than keeping an informer, fitting periodic passes,
// and does not write the objects' status, so its ServiceAccount only
// reads.
type crdSource struct {
	client   dynamic.Interface
	selector labels.Selector
	cluster  string
	// namespace is the logical cloud's: the reader may list there only.
	namespace string
}

func newCRDSource(rc *rest.Config, selector labels.Selector, cluster, namespace string) (*crdSource, error) {
	c, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &crdSource{client: c, selector: selector, cluster: cluster, namespace: namespace}, nil
}

// Endpoints lists the DNSEndpoints; any error (the cluster unreachable,
// the CRD missing, access denied) fails the whole list.
func (s *crdSource) Endpoints(ctx context.Context) ([]*endpoint.Endpoint, error) {
	var out []*endpoint.Endpoint
	opts := metav1.ListOptions{LabelSelector: s.selector.String()}
	for {
		list, err := s.client.Resource(dnsEndpoints).Namespace(s.namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list DNSEndpoints on cluster %s: %w", s.cluster, err)
		}
		for i := range list.Items {
			// Through JSON, as the API server sent it: the unstructured
			// converter cannot fill Endpoint, which has unexported fields.
			var de apiv1alpha1.DNSEndpoint
			b, err := list.Items[i].MarshalJSON()
			if err == nil {
				err = json.Unmarshal(b, &de)
			}
			if err != nil {
				return nil, fmt.Errorf("DNSEndpoint %s/%s on cluster %s: %w", list.Items[i].GetNamespace(), list.Items[i].GetName(), s.cluster, err)
			}
			out = append(out, endpointsOf(&de)...)
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// endpointsOf is a DNSEndpoint's usable endpoints, with the targets rules
// of external-dns's CRD source: an address target must not end in a dot
// (such an endpoint is passed over, not "fixed"); names in CNAME-like
// targets may.
func endpointsOf(de *apiv1alpha1.DNSEndpoint) []*endpoint.Endpoint {
	var out []*endpoint.Endpoint
	for _, ep := range de.Spec.Endpoints {
		if ep == nil {
			continue
		}
		illegal := false
		if !endpoint.RequiresTrailingDot(ep.RecordType) {
			switch ep.RecordType {
			case endpoint.RecordTypeTXT, endpoint.RecordTypeMX, endpoint.RecordTypeSRV:
			case endpoint.RecordTypeNAPTR:
				for _, t := range ep.Targets {
					illegal = illegal || !strings.HasSuffix(t, ".")
				}
			default:
				for _, t := range ep.Targets {
					illegal = illegal || strings.HasSuffix(t, ".")
				}
			}
		}
		if illegal {
			continue
		}
		ep.WithLabel(endpoint.ResourceLabelKey, fmt.Sprintf("crd/%s/%s", de.Namespace, de.Name))
		out = append(out, ep)
	}
	return out
}
