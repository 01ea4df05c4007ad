// The relay's version, on the ground floor: /health and the capabilities
// document both name it, and neither should import it from the other.
export const VERSION = "0.1.0";
