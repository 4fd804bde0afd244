package llm

import (
	"fmt"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Token counting for upstreams that report no usage. OpenAI-family models
// are counted with their own encoding (o200k_base for GPT-4o, GPT-4.1,
// GPT-5 and the o-series, cl100k_base for GPT-4 and GPT-3.5); other models
// are counted with cl100k_base as an approximation. Such counts are marked
// Estimated.

var (
	codecOnce sync.Map // tokenizer.Encoding -> *codecEntry
)

type codecEntry struct {
	once  sync.Once
	codec tokenizer.Codec
}

func codecFor(enc tokenizer.Encoding) tokenizer.Codec {
	v, _ := codecOnce.LoadOrStore(enc, &codecEntry{})
	e := v.(*codecEntry)
	e.once.Do(func() {
		c, err := tokenizer.Get(enc)
		if err == nil {
			e.codec = c
		}
	})
	return e.codec
}

// EncodingFor names the tiktoken encoding used to count tokens of a model name.
func EncodingFor(modelName string) tokenizer.Encoding {
	n := strings.ToLower(modelName)
	if i := strings.LastIndexByte(n, '/'); i >= 0 {
		n = n[i+1:]
	}
	for _, p := range []string{"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "gpt-oss"} {
		if strings.HasPrefix(n, p) {
			return tokenizer.O200kBase
		}
	}
	return tokenizer.Cl100kBase
}

// CountTokens counts the tokens of s with the encoding of modelName.
func CountTokens(modelName, s string) int {
	if s == "" {
		return 0
	}
	c := codecFor(EncodingFor(modelName))
	if c == nil {
		return (len(s) + 3) / 4
	}
	n, err := c.Count(s)
	if err != nil {
		return (len(s) + 3) / 4
	}
	return n
}

// estimatePromptTokens counts a request's prompt the way OpenAI's chat
// format does: 3 tokens of framing per message, 1 more for a name, and 3
// priming the reply; tool definitions counted as their JSON text; an image
// as a fixed ImageTokensHigh (ImageTokensLow at low detail).
func estimatePromptTokens(modelName string, r *Request) int {
	if len(r.Messages) == 0 {
		return CountTokens(modelName, r.Prompt)
	}
	n := 3
	for _, m := range r.Messages {
		n += 3 + CountTokens(modelName, m.Role) + CountTokens(modelName, m.Content)
		if m.Name != "" {
			n += 1 + CountTokens(modelName, m.Name)
		}
		for _, tc := range m.ToolCalls {
			n += 3 + CountTokens(modelName, tc.Name) + CountTokens(modelName, tc.Arguments)
		}
		for _, p := range m.Parts {
			if p.Image != nil {
				n += imageTokens(p.Image)
			}
		}
	}
	for _, t := range r.Tools {
		n += 8 + CountTokens(modelName, t.Name) + CountTokens(modelName, t.Description) + CountTokens(modelName, string(t.Parameters))
	}
	return n
}

// estimateCompletionTokens counts generated text and tool calls.
func estimateCompletionTokens(modelName, text string, calls []ToolCall) int {
	n := CountTokens(modelName, text)
	for _, tc := range calls {
		n += 3 + CountTokens(modelName, tc.Name) + CountTokens(modelName, tc.Arguments)
	}
	return n
}

// DecodeTokens turns token ids of modelName's encoding back into text
// (bytes that are not valid UTF-8, a character split between two inputs,
// become U+FFFD). It fails on an id the encoding does not have.
func DecodeTokens(modelName string, ids []int) (string, error) {
	c := codecFor(EncodingFor(modelName))
	if c == nil {
		return "", fmt.Errorf("no tokenizer for %s", modelName)
	}
	u := make([]uint, len(ids))
	for i, id := range ids {
		u[i] = uint(id)
	}
	s, err := c.Decode(u)
	if err != nil {
		return "", err
	}
	return strings.ToValidUTF8(s, "\uFFFD"), nil
}
