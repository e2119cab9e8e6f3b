package deploy_test

import (
	"fmt"
	"strings"
	"unicode"
)

// refs are the metric names and label names a PromQL expression uses.
type refs struct {
	metrics []string
	labels  []string
	// matchers are label="value" equality matchers, by metric.
	matchers []matcher
}

type matcher struct{ metric, label, value string }

// promqlKeywords are identifiers that are not metric names.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true, "atan2": true,
	// aggregations, which may be followed by "by (...)" rather than "("
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "stddev": true, "stdvar": true, "group": true,
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "limitk": true, "limit_ratio": true,
}

// labelLists are keywords followed by a parenthesised list of label names.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// parseRefs reads the metric and label names of a PromQL expression (or a
// Grafana target, whose $variables it skips). It is a scanner, not a full
// parser: promtool checks the syntax; this finds every name so that each
// can be checked against what Pylon exports.
func parseRefs(expr string) (refs, error) {
	var r refs
	s := []rune(expr)
	last := "" // the metric name a following {...} belongs to
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(s, i)
			if err != nil {
				return r, fmt.Errorf("%s: %w", expr, err)
			}
			i = j
		case c == '$':
			i = skipVariable(s, i)
		case c == '[':
			j := indexFrom(s, i, ']')
			if j < 0 {
				return r, fmt.Errorf("%s: unclosed [", expr)
			}
			i = j + 1
		case c == '{':
			j, err := r.selector(s, i, last)
			if err != nil {
				return r, fmt.Errorf("%s: %w", expr, err)
			}
			i = j
		case c == '_' || c == ':' || unicode.IsLetter(c):
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == ':' || unicode.IsLetter(s[j]) || unicode.IsDigit(s[j])) {
				j++
			}
			word, next := string(s[i:j]), nextNonSpace(s, j)
			i = j
			last = ""
			switch {
			case labelLists[strings.ToLower(word)] && next < len(s) && s[next] == '(':
				k := indexFrom(s, next, ')')
				if k < 0 {
					return r, fmt.Errorf("%s: unclosed %s(", expr, word)
				}
				for _, l := range strings.Split(string(s[next+1:k]), ",") {
					if l = strings.TrimSpace(l); l != "" {
						r.labels = append(r.labels, l)
					}
				}
				i = k + 1
			case labelLists[strings.ToLower(word)], promqlKeywords[strings.ToLower(word)]:
			case next < len(s) && s[next] == '(':
				// a function or aggregation
			default:
				r.metrics = append(r.metrics, word)
				last = word
			}
		case unicode.IsDigit(c) || c == '.':
			i = skipNumber(s, i)
		default:
			i++
		}
	}
	return r, nil
}

// selector reads {label op "value", ...} starting at s[i] == '{'.
func (r *refs) selector(s []rune, i int, metric string) (int, error) {
	i++
	for i < len(s) {
		i = nextNonSpace(s, i)
		if i < len(s) && s[i] == '}' {
			return i + 1, nil
		}
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		j := i
		for j < len(s) && (s[j] == '_' || unicode.IsLetter(s[j]) || unicode.IsDigit(s[j])) {
			j++
		}
		if j == i {
			return 0, fmt.Errorf("bad label matcher at %q", string(s[i:]))
		}
		label := string(s[i:j])
		j = nextNonSpace(s, j)
		op := ""
		for j < len(s) && strings.ContainsRune("=!~", s[j]) {
			op += string(s[j])
			j++
		}
		j = nextNonSpace(s, j)
		if op == "" || j >= len(s) || (s[j] != '"' && s[j] != '\'' && s[j] != '`') {
			return 0, fmt.Errorf("label %s: want an operator and a quoted value", label)
		}
		k, err := skipString(s, j)
		if err != nil {
			return 0, err
		}
		r.labels = append(r.labels, label)
		if op == "=" && metric != "" {
			r.matchers = append(r.matchers, matcher{metric: metric, label: label, value: string(s[j+1 : k-1])})
		}
		i = k
	}
	return 0, fmt.Errorf("unclosed {")
}

func skipString(s []rune, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == '\\' && q != '`' {
			j++
			continue
		}
		if s[j] == q {
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string")
}

// skipVariable skips a Grafana variable: $name or ${name...}.
func skipVariable(s []rune, i int) int {
	i++
	if i < len(s) && s[i] == '{' {
		if j := indexFrom(s, i, '}'); j >= 0 {
			return j + 1
		}
		return len(s)
	}
	for i < len(s) && (s[i] == '_' || unicode.IsLetter(s[i]) || unicode.IsDigit(s[i])) {
		i++
	}
	return i
}

func skipNumber(s []rune, i int) int {
	for i < len(s) && (unicode.IsDigit(s[i]) || s[i] == '.') {
		i++
	}
	if i+1 < len(s) && (s[i] == 'e' || s[i] == 'E') && (unicode.IsDigit(s[i+1]) || s[i+1] == '-' || s[i+1] == '+') {
		i += 2
		for i < len(s) && unicode.IsDigit(s[i]) {
			i++
		}
	}
	// A duration outside brackets (offset 5m) is letters after digits.
	for i < len(s) && unicode.IsLetter(s[i]) {
		i++
	}
	return i
}

func nextNonSpace(s []rune, i int) int {
	for i < len(s) && unicode.IsSpace(s[i]) {
		i++
	}
	return i
}

func indexFrom(s []rune, i int, c rune) int {
	for j := i; j < len(s); j++ {
		if s[j] == c {
			return j
		}
	}
	return -1
}
