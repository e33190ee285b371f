/**
 * A Jinja2 interpreter for chat templates, as transformers renders them: {@link
 * io.kvrouter.tokenize.jinja.Template} parses a template once (in transformers' environment:
 * trim_blocks, lstrip_blocks, loop controls, the generation tag) and renders it against JSON values
 * with transformers' globals and Jinja2's builtin filters and tests, raising {@link
 * io.kvrouter.tokenize.jinja.TemplateException} with the template line; {@link
 * io.kvrouter.tokenize.jinja.Py} exposes the Python value semantics the tokenizer also needs
 * (truthiness, type names, repr, json.dumps). Everything else here (the lexer, the tree, the
 * parser, the interpreter and the builtins) is package-private; nothing depends on the tokenizer.
 */
package io.kvrouter.tokenize.jinja;
