/**
 * The OpenAI-compatible front door: takes a client's chat or completion request, tokenizes it as
 * the engine does ({@code io.kvrouter.tokenize}), routes it by KV overlap and load ({@code
 * io.kvrouter.route}), forwards it to the chosen engine and streams the answer back.
 */
package io.kvrouter.gateway;
