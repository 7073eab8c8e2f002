// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/compiler/protogen"

	"github.com/go-resilient/resilient/runtime/policy"
)

var timePackage = protogen.GoImportPath("time")

// durationUnits are the units a duration is written in, the largest
// first, with the name of their constant in package time.
var durationUnits = []struct {
	d    time.Duration
	name string
}{
	{time.Hour, "Hour"},
	{time.Minute, "Minute"},
	{time.Second, "Second"},
	{time.Millisecond, "Millisecond"},
	{time.Microsecond, "Microsecond"},
	{time.Nanosecond, "Nanosecond"},
}

// durationExpr writes d as a Go expression a reader takes in at a glance:
// the largest unit that divides it, "300 * time.Millisecond",
// "24 * time.Hour", "time.Second"; "0" for none.
func durationExpr(g *protogen.GeneratedFile, d time.Duration) string {
	if d == 0 {
		return "0"
	}
	for _, u := range durationUnits {
		if d%u.d != 0 {
			continue
		}
		unit := g.QualifiedGoIdent(timePackage.Ident(u.name))
		if n := d / u.d; n != 1 {
			return strconv.FormatInt(int64(n), 10) + " * " + unit
		}
		return unit
	}
	panic("unreachable: every duration is a whole number of nanoseconds")
}

// codesExpr writes a set of status codes as the policy.CodesOf call that
// makes it, in the order of their numbers: on one line for one or two
// codes, one code a line for more, so that no line of the literal grows
// past 100 columns.
func codesExpr(g *protogen.GeneratedFile, cs policy.CodeSet) string {
	var args []string
	for _, c := range codesIn(cs) {
		// The constants of package codes are named as Code.String spells
		// them: codes.Unavailable, codes.DeadlineExceeded.
		args = append(args, g.QualifiedGoIdent(codesPackage.Ident(c.String())))
	}
	call := g.QualifiedGoIdent(policyPackage.Ident("CodesOf"))
	if len(args) <= 2 {
		return call + "(" + strings.Join(args, ", ") + ")"
	}
	return call + "(\n" + strings.Join(args, ",\n") + ",\n)"
}
