// Package session is pibot's store for pi-compatible session files: JSONL
// trees in pi's v3 format (header line, then entries with 8-hex ids and
// parentId links, in pi's key order) that pi itself can open.
//
// Loading keeps every line's raw bytes and decodes only the envelope
// (type, id, parentId, timestamp, the "pibot" chat metadata and the cluster
// "fence"); message bodies are decoded on demand, and Context emits stored
// messages byte for byte, so unknown fields always survive. Legacy v1/v2
// files are migrated like pi does.
//
// WriteContext answers one context without loading the file: it streams
// the file once keeping only each entry's envelope and offset (read from a
// message line's prefix: pi writes the message last, and pibot writes its
// own fields before it), walks from the leaf to the root, scans the lines
// of that path and copies their messages from the file to the writer. On
// anything the full loader would read differently (a legacy version, a
// damaged line where it looks, a stale fence, a parent that is not an
// earlier entry) it falls back to Open before writing anything.
//
// Appends never wait for the disk: lines are buffered and a flush (the
// group commit, Flush, or SyncAlways) writes them with one write and one
// fdatasync. A file may be created at once or, with Options.DeferCreate, by
// its first flush, exclusively and with its directory fsynced.
//
// pibot differs from pi on purpose: a session file is created by its
// first flush, not when the first answer arrives; a torn tail is truncated (keeping a
// .broken copy) and the file always ends in a newline before an append; a
// damaged line in the middle is skipped and reported, and entries whose
// parent was lost in it are re-attached to the nearest earlier entry; a
// file that is not a session is refused, never overwritten; fork keeps
// label entries on the path so no entry is orphaned.
//
// A Session writes one file; its Tree is the file's content in memory
// (header, entries, branches, heads, contexts), and is all a reader needs.
//
// Several chat locations can share one file: each has a head, recoverable
// from the file alone (see Tree.Heads). Storage abstracts the file
// system; FileStorage and MemStorage implement it and the sessiontest
// package runs the same conformance suite over both.
package session
