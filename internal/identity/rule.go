package identity

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Placeholders a rule's template may use.
const (
	phTrustDomain = "trust_domain"
	phCluster     = "cluster"
	phID          = "id"
)

// Bounds on what a node may claim for its id and cluster to be bound to a
// certificate name. A SPIFFE path segment allows letters, digits, '.', '-'
// and '_' (SPIFFE ID spec, 2.2); a DNS label no '.', or "{id}.{cluster}"
// would let id "a.b" in cluster "c" pass for id "a" in cluster "b.c".
const (
	maxSPIFFESegment = 128
	maxDNSLabel      = 63
)

// Rule binds a node's id and cluster to the name its certificate must
// prove: a SPIFFE ID when the template is a spiffe:// URI, else a DNS SAN.
type Rule struct {
	template string
	spiffe   bool
	// parts alternate literal text and placeholders ({id}, {cluster});
	// {trust_domain} is substituted when the rule is parsed.
	parts []part
}

type part struct {
	literal     string
	placeholder string // phID or phCluster; "" for a literal
}

// ParseRule parses a template such as
// "spiffe://{trust_domain}/ns/{cluster}/sa/{id}". The placeholders are
// {trust_domain}, {cluster} and {id}; a template that is not a spiffe://
// URI is matched against the DNS SANs, e.g.
// "{id}.{cluster}.proxies.example.com". An empty template, an unknown
// placeholder, {trust_domain} without a trust domain, and a template that
// names neither {id} nor {cluster} (it would bind no node) are errors.
func ParseRule(template, trustDomain string) (*Rule, error) {
	if strings.TrimSpace(template) == "" {
		return nil, errors.New("identity rule: the template is empty; use e.g. spiffe://{trust_domain}/ns/{cluster}/sa/{id}")
	}
	r := &Rule{template: template, spiffe: strings.HasPrefix(strings.ToLower(template), "spiffe://")}
	rest := template
	binds := false
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if close := strings.IndexByte(rest, '}'); close >= 0 && (open < 0 || close < open) {
			return nil, fmt.Errorf("identity rule %q: unmatched '}'", template)
		}
		if open < 0 {
			r.literal(rest)
			break
		}
		r.literal(rest[:open])
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("identity rule %q: unmatched '{'", template)
		}
		name := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		switch name {
		case phTrustDomain:
			if err := checkTrustDomain(trustDomain); err != nil {
				return nil, fmt.Errorf("identity rule %q: %w", template, err)
			}
			r.literal(trustDomain)
		case phID, phCluster:
			binds = true
			r.parts = append(r.parts, part{placeholder: name})
		default:
			return nil, fmt.Errorf("identity rule %q: unknown placeholder {%s}; use {trust_domain}, {cluster} or {id}", template, name)
		}
	}
	if !binds {
		return nil, fmt.Errorf("identity rule %q: names neither {id} nor {cluster}, so it would bind no node to its certificate", template)
	}
	if err := r.checkBounds(); err != nil {
		return nil, err
	}
	return r, nil
}

// separator is what must bound each placeholder in the rule's names: "/"
// between SPIFFE path segments, "." between DNS labels. checkValue refuses
// it inside a value, so each value fills exactly one segment or label.
func (r *Rule) separator() byte {
	if r.spiffe {
		return '/'
	}
	return '.'
}

// checkBounds requires each {id} and {cluster} to be a whole segment (or
// label): bounded on both sides by the template's ends or the separator.
// Otherwise two different claims can make one name:
// "spiffe://td/{cluster}.{id}" gives spiffe://td/a.b.c for id "c" in
// cluster "a.b" and for id "b.c" in cluster "a"; "{id}{cluster}.x" gives
// ab.x for ("a", "b") and ("ab", "").
func (r *Rule) checkBounds() error {
	sep := r.separator()
	for i, p := range r.parts {
		if p.placeholder == "" {
			continue
		}
		before := i == 0 || (r.parts[i-1].placeholder == "" && r.parts[i-1].literal[len(r.parts[i-1].literal)-1] == sep)
		after := i == len(r.parts)-1 || (r.parts[i+1].placeholder == "" && r.parts[i+1].literal[0] == sep)
		if !before || !after {
			return fmt.Errorf("identity rule %q: {%s} must be a whole %s, with %q or the template's end on both sides; otherwise two different node claims could make the same name", r.template, p.placeholder, r.unit(), string(sep))
		}
	}
	if !r.spiffe && strings.ContainsAny(r.template, ":/") {
		return fmt.Errorf("identity rule %q: a DNS name has no ':' or '/'; a SPIFFE rule starts with spiffe://", r.template)
	}
	return nil
}

// unit names what a placeholder fills in the rule's names.
func (r *Rule) unit() string {
	if r.spiffe {
		return "path segment"
	}
	return "DNS label"
}

func (r *Rule) literal(s string) {
	if s != "" {
		r.parts = append(r.parts, part{literal: s})
	}
}

// checkTrustDomain accepts a SPIFFE trust domain name: lower-case letters,
// digits, '.', '-' and '_' (SPIFFE ID spec, 2.1).
func checkTrustDomain(td string) error {
	if td == "" {
		return errors.New("{trust_domain} is used but no trust domain is configured")
	}
	if len(td) > 255 {
		return errors.New("the trust domain is longer than 255 characters")
	}
	for _, c := range td {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("trust domain %q: only lower-case letters, digits, '.', '-' and '_' are allowed", td)
		}
	}
	return nil
}

// String returns the rule's template.
func (r *Rule) String() string { return r.template }

// SPIFFE reports whether the rule matches SPIFFE IDs (else DNS SANs).
func (r *Rule) SPIFFE() bool { return r.spiffe }

// Want returns the name a certificate must prove for the node, or an error
// when the node's id or cluster cannot be part of such a name.
func (r *Rule) Want(nodeID, cluster string) (string, error) {
	var b strings.Builder
	for _, p := range r.parts {
		switch p.placeholder {
		case "":
			b.WriteString(p.literal)
			continue
		case phID:
			if err := r.checkValue("id", nodeID); err != nil {
				return "", err
			}
			b.WriteString(nodeID)
		case phCluster:
			if err := r.checkValue("cluster", cluster); err != nil {
				return "", err
			}
			b.WriteString(cluster)
		}
	}
	return b.String(), nil
}

// checkValue refuses a node id or cluster that could not appear in the
// rule's name as one segment or label: empty, too long, or with a
// character that would let one claim pass for another ('/', '.', control
// characters, spaces).
func (r *Rule) checkValue(field, v string) error {
	limit, allowed := maxSPIFFESegment, "letters, digits, '.', '-' or '_'"
	if !r.spiffe {
		limit, allowed = maxDNSLabel, "letters, digits, '-' or '_'"
	}
	bad := v == "" || len(v) > limit || (r.spiffe && (v == "." || v == ".."))
	for i := 0; i < len(v) && !bad; i++ {
		c := v[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || (r.spiffe && c == '.')
		bad = !ok
	}
	if bad {
		return fmt.Errorf("node %s %s cannot be bound to a certificate by the rule %q: it must be 1 to %d %s", field, Quote(v), r.template, limit, allowed)
	}
	if !r.spiffe && strings.ToLower(v) != v {
		// DNS names compare without regard to case while node ids do
		// not: a certificate for edge-1 would prove EDGE-1 too.
		return fmt.Errorf("node %s %s cannot be bound to a certificate by the DNS rule %q: it must be lower case, since DNS names compare without regard to case and a certificate for one spelling would prove every other", field, Quote(v), r.template)
	}
	return nil
}

// Check returns nil when id proves the node's claim, else an error whose
// text is a clear reason for the operator and for the client, e.g.
// `node "edge-1" in cluster "edge" must present a certificate for
// spiffe://example.org/ns/edge/sa/edge-1; this one proves
// spiffe://example.org/ns/edge/sa/edge-2`. SPIFFE IDs compare exactly; DNS
// names without regard to case; a wildcard DNS SAN proves no node.
func (r *Rule) Check(id Identity, nodeID, cluster string) error {
	want, err := r.Want(nodeID, cluster)
	if err != nil {
		return err
	}
	what := "a certificate for " + want
	if !r.spiffe {
		what = "a certificate with DNS name " + want
	}
	claim := fmt.Sprintf("node %s in cluster %s must present %s", Quote(nodeID), Quote(cluster), what)
	switch {
	case !id.Verified():
		return fmt.Errorf("%s; the connection has no verified client certificate", claim)
	case r.spiffe && id.SPIFFE == want:
		return nil
	case r.spiffe:
		return fmt.Errorf("%s; this one proves %s", claim, provesSPIFFE(id))
	}
	for _, d := range id.DNS {
		if strings.EqualFold(d, want) {
			return nil
		}
	}
	return fmt.Errorf("%s; this one proves %s", claim, id)
}

func provesSPIFFE(id Identity) string {
	if id.SPIFFE == "" {
		return "no SPIFFE ID (" + id.String() + ")"
	}
	return id.SPIFFE
}

// maxQuoted bounds a client-supplied string in a message: a node id of a
// megabyte must not become a megabyte of log per line.
const maxQuoted = 128

// Quote quotes s for a message, cut to a bounded length.
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// Binds reports which of a node's claims the rule binds to its
// certificate: a claim the rule names is proven, every other (metadata,
// locality, and id or cluster when the template leaves them out) is the
// node's word alone. A nil rule binds nothing.
func (r *Rule) Binds() (id, cluster bool) {
	if r == nil {
		return false, false
	}
	for _, p := range r.parts {
		id = id || p.placeholder == phID
		cluster = cluster || p.placeholder == phCluster
	}
	return id, cluster
}
