// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/check"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// IsKeyField reports whether a request field can be (part of) a key, an
// idempotency key or a cache key: a singular string, bytes or integer
// field, which generated code formats as text (runtime.KeyFromInt, …).
// Its zero value ("", empty bytes, 0) is no idempotency key: proto3
// cannot tell an integer left unset from 0, so a request whose key is 0 is
// sent without one and never retried, instead of every forgotten key
// being the same key "0" (retried, and deduplicated by the server as one
// request).
func IsKeyField(fd protoreflect.FieldDescriptor) bool {
	if fd.IsList() || fd.IsMap() {
		return false
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return true
	default:
		return false
	}
}

// CheckIdempotencyKey checks the idempotency_key of a method: only a unary
// method sends one (written on a stream it is refused, inherited it is
// ignored), and it names a top-level key field (IsKeyField) of the
// request. An integer field is accepted with or without presence: 0 is no
// key either way (see IsKeyField), as the refusal of a field of another
// type says. A field with a default other than its zero value (proto2,
// editions) is refused: an unset key would read as that default, one key
// shared by every request that forgot it.
func CheckIdempotencyKey(m protoreflect.MethodDescriptor, own *resilientv1.Policy, eff Merged, add func(Finding)) {
	if msg := check.StreamKey(string(m.Name()), StreamKind(m)); msg != "" {
		if own.GetIdempotencyKey() != "" {
			add(Finding{RuleKeyField, LevelMethod, "idempotency_key", msg + ": remove it"})
		}
		return
	}
	name := eff.Policy.GetIdempotencyKey()
	if name == "" {
		return
	}
	lvl, msg := eff.SetBy["idempotency_key"], m.Input()
	fd := msg.Fields().ByName(protoreflect.Name(name))
	switch {
	case fd == nil:
		add(Finding{RuleKeyField, lvl, "idempotency_key",
			fmt.Sprintf("field %q does not exist in %s%s: name a top-level string, bytes or integer field of the request", name, msg.FullName(), didYouMean(msg, name))})
	case !IsKeyField(fd):
		add(Finding{RuleKeyField, lvl, "idempotency_key",
			fmt.Sprintf("field %q of %s is %s: an idempotency key must be a singular string, bytes or integer field%s", name, msg.FullName(), describeField(fd), zeroIsNoKey)})
	case hasNonZeroDefault(fd):
		add(Finding{RuleKeyField, lvl, "idempotency_key",
			fmt.Sprintf("field %q of %s has the default %s: a request that leaves it unset reads the default, so every such request would send the same key (retried, and deduplicated by the server as one request); remove the default, so that an unset key is no key",
				name, msg.FullName(), defaultText(fd))})
	}
}

// hasNonZeroDefault reports whether a key field declares a default other
// than its zero value (proto2, or editions): its getter returns that
// default for a request that left the field unset.
func hasNonZeroDefault(fd protoreflect.FieldDescriptor) bool {
	if !fd.HasDefault() {
		return false
	}
	v := fd.Default()
	switch fd.Kind() {
	case protoreflect.StringKind:
		return v.String() != ""
	case protoreflect.BytesKind:
		return len(v.Bytes()) != 0
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return v.Uint() != 0
	default:
		return v.Int() != 0
	}
}

// defaultText writes a field's default as the .proto file does.
func defaultText(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return fmt.Sprintf("%q", fd.Default().String())
	case protoreflect.BytesKind:
		return fmt.Sprintf("%q", fd.Default().Bytes())
	}
	return fd.Default().String()
}

// zeroIsNoKey ends the message that refuses a field of the wrong type,
// so that nobody picks an integer expecting 0 to be a key like any other.
const zeroIsNoKey = ` (its zero value, "" or 0, is no key: proto3 cannot tell an unset field from it, so such a request is sent without a key and never retried)`

// CheckGeneratedKey checks generate_idempotency_key: written on a
// streaming method it is refused (inherited, ignored), and it contradicts
// an idempotency_key written at another level. The same level is Check's.
func CheckGeneratedKey(m protoreflect.MethodDescriptor, own *resilientv1.Policy, eff Merged, add func(Finding)) {
	p := eff.Policy
	if !p.GetGenerateIdempotencyKey() {
		return
	}
	if msg := check.StreamKey(string(m.Name()), StreamKind(m)); msg != "" {
		if own.GetGenerateIdempotencyKey() {
			add(Finding{RuleKeyField, LevelMethod, "generate_idempotency_key", msg + ": remove it"})
		}
		return
	}
	key := p.GetIdempotencyKey()
	if key == "" {
		return
	}
	kl, gl := eff.SetBy["idempotency_key"], eff.SetBy["generate_idempotency_key"]
	switch {
	case kl > gl:
		add(Finding{RuleIdempotencyContradiction, kl, "idempotency_key",
			fmt.Sprintf("%s names its field %q as the idempotency key while %s sets generate_idempotency_key: keep one; to send the field, add generate_idempotency_key: false beside idempotency_key",
				m.Name(), key, gl.Option())})
	case gl > kl:
		add(Finding{RuleIdempotencyContradiction, gl, "generate_idempotency_key",
			fmt.Sprintf("%s already sends its field %q as the idempotency key (idempotency_key set in %s): remove generate_idempotency_key",
				m.Name(), key, kl.Option())})
	}
}

// didYouMean names the field a misspelt name probably meant (its JSON
// name, or another case), or "".
func didYouMean(msg protoreflect.MessageDescriptor, name string) string {
	hint := ""
	for i := 0; i < msg.Fields().Len(); i++ {
		fd := msg.Fields().Get(i)
		if fd.JSONName() == name || strings.EqualFold(string(fd.Name()), name) {
			hint = fmt.Sprintf(" (did you mean %q?)", fd.Name())
		}
	}
	return hint
}

// describeField says what a field is, for a message that refuses it as a
// key: "a repeated string field", "a map", "an enum (pkg.Color)".
func describeField(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "a map"
	case fd.IsList():
		return "a repeated " + describeKind(fd) + " field"
	case fd.Kind() == protoreflect.EnumKind:
		return "an " + describeKind(fd)
	default:
		return "a " + describeKind(fd)
	}
}

func describeKind(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.Message() != nil:
		return "message (" + string(fd.Message().FullName()) + ")"
	case fd.Enum() != nil:
		return "enum (" + string(fd.Enum().FullName()) + ")"
	default:
		return fd.Kind().String()
	}
}
