package ctl

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Shell completion (`pylon completion bash|zsh|fish`, cobra's) completes
// kinds, object names, node ids and group names from the running Pylon's
// admin API, with the read token. A completion runs at every TAB: it
// waits at most completeTimeout, offers at most maxCompletions names, and
// on any failure offers nothing and says nothing (an error printed would
// land in the operator's prompt).
const (
	completeTimeout = 2 * time.Second
	maxCompletions  = 1000
)

type completer = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

// fetch reads path into v for a completion; false on any failure.
func (a *Flags) fetch(path string, v any) bool {
	c := a.Client()
	tok, _, _ := token(c.readSources())
	b, err := c.send(http.MethodGet, path, nil, nil, tok, completeTimeout)
	return err == nil && json.Unmarshal(b, v) == nil
}

// candidates are the names that start with prefix, sorted, once each, at
// most maxCompletions. Only a name a shell takes as it is, unquoted, is
// offered: node ids are the clients' choice, and a shell may insert a
// candidate, or what several share, without quoting it, so a $( ), a ;, a
// glob or a newline in one would run or expand in the operator's shell,
// and a leading "-" would be an option.
func candidates(names []string, prefix string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && literalWord(n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxCompletions {
		out = out[:maxCompletions]
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// literalWord says n is one word to bash, zsh and fish, unquoted, meaning
// itself: ASCII letters, digits and ._:@/+=,- only, and not starting with
// "-" (an option) or "=" (zsh's =command expansion).
func literalWord(n string) bool {
	if n == "" || n[0] == '-' || n[0] == '=' {
		return false
	}
	for i := range len(n) {
		c := n[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:@/+=,-", c) >= 0) {
			return false
		}
	}
	return true
}

// FirstArg completes the first argument with names, and nothing after it.
func FirstArg(names func(prefix string) ([]string, cobra.ShellCompDirective)) completer {
	return func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(prefix)
	}
}

// NodeIDs completes the node ids of the proxies /proxies lists.
func (a *Flags) NodeIDs(prefix string) ([]string, cobra.ShellCompDirective) {
	var body struct {
		Streams []struct {
			Node string `json:"node"`
		} `json:"streams"`
	}
	if !a.fetch("/proxies", &body) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, len(body.Streams))
	for i, s := range body.Streams {
		names[i] = s.Node
	}
	return candidates(names, prefix)
}

// GroupNames completes the node groups of the config served.
func (a *Flags) GroupNames(prefix string) ([]string, cobra.ShellCompDirective) {
	var st struct {
		Config struct {
			Groups []struct {
				Name string `json:"name"`
			} `json:"groups"`
		} `json:"config"`
	}
	if !a.fetch("/status", &st) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, len(st.Config.Groups))
	for i, g := range st.Config.Groups {
		names[i] = g.Name
	}
	return candidates(names, prefix)
}

// CompleteGroupFlag completes a --group flag.
func (a *Flags) CompleteGroupFlag(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("group", func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return a.GroupNames(prefix)
	})
}

// storedObjects completes delete's KIND (the kinds stored, but registered
// endpoints, which endpoints remove takes) and NAME (that kind's names).
func (a *Flags) storedObjects(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 1 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var body struct {
		Objects []struct{ Kind, Name string } `json:"objects"`
	}
	if !a.fetch("/v1/objects", &body) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, o := range body.Objects {
		switch {
		case strings.HasPrefix(o.Kind, "endpoints."):
		case len(args) == 0:
			names = append(names, o.Kind)
		case o.Kind == args[0]:
			names = append(names, o.Name)
		}
	}
	return candidates(names, prefix)
}

// serviceNames completes a SERVICE: the stored services.
func (a *Flags) serviceNames(prefix string) ([]string, cobra.ShellCompDirective) {
	var body struct {
		Objects []struct{ Kind, Name string } `json:"objects"`
	}
	if !a.fetch("/v1/objects", &body) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, o := range body.Objects {
		if o.Kind == "services" {
			names = append(names, o.Name)
		}
	}
	return candidates(names, prefix)
}
