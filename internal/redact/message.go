package redact

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

const (
	anyName        protoreflect.FullName = "google.protobuf.Any"
	dataSourceName protoreflect.FullName = "envoy.config.core.v3.DataSource"
)

// Message returns a copy of m with private key material replaced, at any
// depth and inside google.protobuf.Any (unpacked with the global registry,
// redacted, packed again). m itself is never changed. Secret DataSources
// keep their file name or environment variable name and lose inline
// contents; secret strings and bytes become Redacted; a secret message
// (a private key provider's config) has every payload in it replaced; and
// a PEM private key anywhere else (a Lua script, a header value) is
// scrubbed by String.
func Message(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	c := proto.Clone(m)
	walk(c.ProtoReflect(), false)
	return c
}

// walk redacts m in place; all says m sits under a secret field, so every
// payload in it is secret.
func walk(m protoreflect.Message, all bool) {
	if m.Descriptor().FullName() == anyName {
		walkAny(m, all)
		return
	}
	// Collect first: setting fields while ranging is not allowed.
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	parent := string(m.Descriptor().FullName())
	for _, fd := range fields {
		secret := all && !locators[string(fd.Name())] || secretField(parent, string(fd.Name()), payload(fd))
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for i := range l.Len() {
				if v, ok := value(fd, l.Get(i), secret); ok {
					l.Set(i, v)
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			vd := fd.MapValue()
			var keys []protoreflect.MapKey
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			for _, k := range keys {
				if v, ok := value(vd, mp.Get(k), secret); ok {
					mp.Set(k, v)
				}
			}
		case fd.Message() != nil:
			value(fd, m.Mutable(fd), secret)
		default:
			if v, ok := value(fd, m.Get(fd), secret); ok {
				m.Set(fd, v)
			}
		}
	}
}

// payload says what a field's type can hold.
func payload(fd protoreflect.FieldDescriptor) payloadKind {
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return text
	case protoreflect.MessageKind:
		if fd.Message().FullName() == dataSourceName {
			return dataSource
		}
	}
	return noPayload
}

// value redacts one value of field fd: messages in place, scalars by
// returning the replacement (ok).
func value(fd protoreflect.FieldDescriptor, v protoreflect.Value, secret bool) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		msg := v.Message()
		if secret && msg.Descriptor().FullName() == dataSourceName {
			redactDataSource(msg)
			return v, false
		}
		walk(msg, secret)
		return v, false
	case protoreflect.StringKind:
		s := v.String()
		if secret && s != "" {
			return protoreflect.ValueOfString(Redacted), true
		}
		if r := String(s); r != s {
			return protoreflect.ValueOfString(r), true
		}
	case protoreflect.BytesKind:
		b := v.Bytes()
		if secret && len(b) > 0 {
			return protoreflect.ValueOfBytes([]byte(Redacted)), true
		}
		if mayHoldKey(string(b)) {
			return protoreflect.ValueOfBytes(Bytes(b)), true
		}
	}
	return v, false
}

// redactDataSource replaces inline contents, keeping a file name or an
// environment variable name: where the key is, not what it is.
func redactDataSource(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for _, name := range []protoreflect.Name{"inline_bytes", "inline_string"} {
		if fd := fields.ByName(name); fd != nil && m.Has(fd) {
			m.Set(fields.ByName("inline_string"), protoreflect.ValueOfString(Redacted))
			return
		}
	}
}

// walkAny redacts inside an Any. A type this binary does not know cannot
// be walked: its bytes are dropped when they might hold a key (or sit
// under a secret field), since nothing can say which part is secret.
func walkAny(m protoreflect.Message, all bool) {
	fields := m.Descriptor().Fields()
	urlFD, valFD := fields.ByName("type_url"), fields.ByName("value")
	url, raw := m.Get(urlFD).String(), m.Get(valFD).Bytes()
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	var inner proto.Message
	if err == nil {
		inner = mt.New().Interface()
		err = proto.Unmarshal(raw, inner)
	}
	if err != nil {
		if all || mayHoldKey(string(raw)) {
			m.Clear(valFD)
		}
		return
	}
	walk(inner.ProtoReflect(), all)
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
	if err != nil {
		m.Clear(valFD)
		return
	}
	m.Set(valFD, protoreflect.ValueOfBytes(out))
}
