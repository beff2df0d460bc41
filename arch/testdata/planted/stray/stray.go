// Package stray is in no layer.
package stray
