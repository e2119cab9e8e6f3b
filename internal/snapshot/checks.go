package snapshot

import (
	"fmt"
	"regexp/syntax"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxRegexBytes bounds a regular expression before it is parsed. A regex
// this long cannot fit Envoy's default program size anyway, unless it is
// one huge character class; the bound keeps a hostile config from making
// the parser do megabytes of work.
const MaxRegexBytes = 1024

// MaxRegexProgram is Envoy's default bound on a regex's compiled RE2
// program (runtime key re2.max_program_size.error_level): a RegexMatcher
// whose program is larger is rejected, and the whole resource with it.
const MaxRegexProgram = 100

// RegexProblem says why Envoy or a proxyless gRPC client would reject re,
// or returns "". It parses with Go's regexp/syntax, which reads RE2 syntax
// (what Envoy's safe_regex uses and what grpc-go uses), except for the few
// RE2 features Go lacks (\C, any byte), which are refused here: gRPC
// clients would reject them. The program size is Go's count of
// instructions, which tracks RE2's closely (both expand repetitions; Go
// counts a Unicode class as one instruction where RE2 may use several, so
// Go errs on the side of accepting).
func RegexProblem(re string) string {
	if len(re) > MaxRegexBytes {
		return fmt.Sprintf("regex is %d bytes, over the %d byte limit", len(re), MaxRegexBytes)
	}
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return fmt.Sprintf("invalid regex %q: %v", re, err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return fmt.Sprintf("invalid regex %q: %v", re, err)
	}
	if n := len(prog.Inst); n > MaxRegexProgram {
		return fmt.Sprintf("regex %q compiles to %d instructions, over Envoy's default limit of %d (re2.max_program_size.error_level); simplify it, e.g. fewer {n,m} repetitions", re, n, MaxRegexProgram)
	}
	return ""
}

const (
	regexMatcherName    protoreflect.FullName = "envoy.type.matcher.v3.RegexMatcher"
	durationName        protoreflect.FullName = "google.protobuf.Duration"
	extensionSourceName protoreflect.FullName = "envoy.config.core.v3.ExtensionConfigSource"
)

// valueProblems finds what ValidateAll does not, in one watched message v
// at w's path: regular expressions Envoy would reject and negative
// durations (Envoy rejects them where it reads them, often only when the
// resource is used), and what Envoy refuses in an extension config
// source.
func valueProblems(w *walker, v protoreflect.Message) []fieldError {
	d := v.Descriptor()
	switch d.FullName() {
	case regexMatcherName:
		re := v.Get(d.Fields().ByName("regex")).String()
		if msg := RegexProblem(re); msg != "" {
			return []fieldError{{joinPath(w.path(), "regex"), msg}}
		}
	case durationName:
		s, n := v.Get(d.Fields().ByName("seconds")).Int(), v.Get(d.Fields().ByName("nanos")).Int()
		if s < 0 || n < 0 {
			return []fieldError{{w.path(), "negative duration; Envoy rejects it"}}
		}
	case extensionSourceName:
		if cs, ok := v.Interface().(*corev3.ExtensionConfigSource); ok {
			return extensionSourceProblems(w.path(), cs)
		}
	}
	return nil
}

// extensionSourceProblems finds what Envoy refuses in a filter's
// config_discovery when it loads the listener (or cluster): a default
// applied without warming needs a default, and the default must be of a
// type the filter accepts (FilterConfigProviderManagerImplBase in
// source/common/filter/config_discovery_impl.cc and the listener's
// createDynamicFilterConfigProvider).
func extensionSourceProblems(path string, cs *corev3.ExtensionConfigSource) []fieldError {
	var out []fieldError
	if cs.GetApplyDefaultConfigWithoutWarming() && cs.GetDefaultConfig() == nil {
		out = append(out, fieldError{joinPath(path, "apply_default_config_without_warming"), "set without a default_config; Envoy rejects it"})
	}
	if dc := cs.GetDefaultConfig(); dc != nil && len(cs.GetTypeUrls()) > 0 {
		got := factoryType(dc)
		ok := false
		for _, a := range cs.GetTypeUrls() {
			ok = ok || messageName(a) == got
		}
		if !ok {
			out = append(out, fieldError{joinPath(path, "default_config"), fmt.Sprintf("is a %s, not one of type_urls (%s); Envoy rejects it", got, strings.Join(cs.GetTypeUrls(), ", "))})
		}
	}
	return out
}

// runtimeProblems finds the values Envoy refuses in a runtime layer: a
// list, a null or an unset value ("Invalid runtime entry value for KEY",
// ProtoLayer::walkProtoValue in source/common/runtime/runtime_impl.cc),
// which makes it reject the whole RTDS update. A nested object is a
// prefix of keys, except one with numerator or denominator (a fractional
// percent) or an empty one, which are values. Fields are named by the
// runtime key, as Envoy names them: "layer.a.b".
func runtimeProblems(prefix string, layer *structpb.Struct) []fieldError {
	var out []fieldError
	keys := make([]string, 0, len(layer.GetFields()))
	for k := range layer.GetFields() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		key := joinPath(prefix, k)
		switch v := layer.GetFields()[k]; v.GetKind().(type) {
		case *structpb.Value_ListValue, *structpb.Value_NullValue, nil:
			out = append(out, fieldError{"layer." + key, "a runtime value must be a number, string, boolean or fractional percent, not a list or null; Envoy rejects the layer"})
		case *structpb.Value_StructValue:
			f := v.GetStructValue().GetFields()
			_, num := f["numerator"]
			_, den := f["denominator"]
			if len(f) > 0 && !num && !den {
				out = append(out, runtimeProblems(key, v.GetStructValue())...)
			}
		}
	}
	return out
}
