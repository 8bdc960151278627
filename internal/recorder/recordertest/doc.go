// Package recordertest checks, in tests, the Events a recorder sent to a
// fake events recorder.
package recordertest
