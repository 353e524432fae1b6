"""detpg: a third algorithm defined only inside the tests, to show that the contract (`rlfit.algos.contract`)
is all an algorithm needs: a deterministic tanh actor trained by a policy gradient with fixed Gaussian
exploration noise. Registered at test time (`rlfit.algos.registry.register_algorithm('detpg',
'tests.algos.detpg')`); nothing outside this folder names it."""
