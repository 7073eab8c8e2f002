// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import "github.com/go-resilient/resilient/internal/check"

// words is a text of a problem that names values (its core, its mend, its
// subject, what leaving a value out stands for), written once for both of
// its readers: a Go author, who writes the policy's fields (Validate,
// runtime.NewClient, server.NewGuard), and an operator, who writes the
// options' names (the override loader). A value is written between
// braces as its Go path from the group or the method the problem is
// about, "{StaleTTL}", "{Retry.MaxAttempts}", and one given a value puts
// it after a colon, "{Retry.MaxAttempts: 1}". The Go form drops the
// braces ("Retry.MaxAttempts 1"); the options form names each part of the
// path as the options do ("retry.max_attempts: 1"). Text outside the
// braces is the same in both. It is internal/check's Words, in which the
// checks that relate a value to another name it ("{FreshTTL}"), so that
// the core of a message is in its reader's names too.
type words = check.Words
