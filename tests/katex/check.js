// Parse every math span given on stdin (a JSON list of {tex, display}) with
// KaTeX in strict mode; print a JSON list of error messages (null = parsed).
const katex = require("katex");
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const spans = JSON.parse(input);
  const results = spans.map(({ tex, display }) => {
    try {
      katex.renderToString(tex, { displayMode: display, strict: "error", throwOnError: true });
      return null;
    } catch (e) {
      return String(e.message);
    }
  });
  process.stdout.write(JSON.stringify(results));
});
