// The C++ program scripts/memory-aa.sh has clang++ parse (-fsyntax-only): templates to chew on.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

int main()
{
	std::map<std::string, std::vector<int>> m;
	for (int i = 0; i < 100; i++)
		m[std::to_string(i)].push_back(i);
	return (int)std::count_if(m.begin(), m.end(), [](auto &p) { return !p.second.empty(); });
}
