// Placeholder until the server lands: prints usage.
#include <cstdio>
int main() {
  std::puts("pagoda: server not built yet");
  return 1;
}
