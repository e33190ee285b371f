/**
 * The command line, and the only place picocli is used: {@link io.kvrouter.cli.Main} and every
 * command ({@code serve}, {@code gateway}, {@code mock-engine}, {@code simulate}, {@code bench},
 * {@code tokenizer}) with the option mixins they share. A command declares its flags, builds the
 * settings values and hands them to the libraries.
 */
package io.kvrouter.cli;
