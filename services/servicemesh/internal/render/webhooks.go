package render

import (
	"fmt"
	"strings"
)

// objectWebhookPrefix names the injector's webhooks that select pods by
// their istio.io/rev label in any namespace without one.
const objectWebhookPrefix = "rev.object."

// scopeWebhooks confines the chart's admission webhooks to the logical
// cloud's own namespaces: every webhook of a Mutating- or
// ValidatingWebhookConfiguration gets DCM's labels of the logical cloud
// (kube.Labels) in its namespaceSelector's matchLabels, next to the
// chart's expressions, and the injector's webhooks that select by a pod's
// revision label alone ("rev.object.*") are dropped: a pod of the logical
// cloud is injected because its namespace carries the revision. So a pod
// or Istio object labelled with this revision in another tenant's
// namespace is never sent to this logical cloud's istiod. Other objects
// are left as they are.
func scopeWebhooks(o object, labels map[string]string) error {
	kind := o.str("kind")
	if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
		return nil
	}
	hooks, ok := o["webhooks"].([]any)
	if !ok {
		return fmt.Errorf("%s %s has no webhooks list", kind, o.name())
	}
	kept := make([]any, 0, len(hooks))
	for _, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("%s %s: a webhook is not an object", kind, o.name())
		}
		name, _ := hook["name"].(string)
		if kind == "MutatingWebhookConfiguration" && strings.HasPrefix(name, objectWebhookPrefix) {
			continue
		}
		sel, _ := hook["namespaceSelector"].(map[string]any)
		if sel == nil {
			sel = map[string]any{}
			hook["namespaceSelector"] = sel
		}
		ml, _ := sel["matchLabels"].(map[string]any)
		if ml == nil {
			ml = map[string]any{}
			sel["matchLabels"] = ml
		}
		for k, v := range labels {
			ml[k] = v
		}
		kept = append(kept, hook)
	}
	if len(kept) == 0 {
		return fmt.Errorf("%s %s: no webhook left", kind, o.name())
	}
	o["webhooks"] = kept
	return nil
}
