// Package guard holds the watermark rule of DESIGN.md §5 in one place and an
// in-memory Guard for tests and single-process resources.
//
// The rule, per object: a token below the highest accepted so far is
// rejected with a *fence.StaleTokenError carrying the presented and the
// required token; an equal token is accepted (repeated writes within one
// grant); a higher token is accepted and becomes the watermark.
package guard
