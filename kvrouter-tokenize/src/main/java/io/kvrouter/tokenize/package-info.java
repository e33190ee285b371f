/**
 * Tokenization as the engine does it: {@link io.kvrouter.tokenize.Tokenizer} over Hugging Face
 * tokenizers (DJL) with the model's {@link io.kvrouter.tokenize.ChatTemplate} (rendered by {@code
 * io.kvrouter.tokenize.jinja}) and a cache of repeated segments, {@link
 * io.kvrouter.tokenize.EngineTokenizer} to ask the engine itself, and {@link
 * io.kvrouter.tokenize.TokenizerCheck} to compare the two.
 */
package io.kvrouter.tokenize;
